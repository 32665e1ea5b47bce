// ClockTable: one shard's view of every worker's clock.
//
// A worker's clock is the number of iterations whose gradients it has
// completely pushed to this shard (every chunk the shard holds). The table
// also remembers the largest clock gap (max - min) it has seen, which the
// shard reports as staleness_max (ShardStats).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pstrain::server {

class ClockTable {
 public:
  explicit ClockTable(int num_workers) : clocks_(static_cast<size_t>(num_workers), 0) {}

  int num_workers() const { return static_cast<int>(clocks_.size()); }
  // REQUIRES (all taking a worker): 0 <= worker < num_workers().
  int64_t clock(int worker) const { return clocks_[static_cast<size_t>(worker)]; }
  const std::vector<int64_t>& clocks() const { return clocks_; }
  int64_t min() const;
  int64_t max() const;
  // Largest max() - min() since construction (or the value restored).
  int64_t max_gap() const { return max_gap_; }

  // The worker completed its push of iteration clock(worker).
  void Advance(int worker);
  // Restoring a checkpoint: sets every clock (REQUIRES: one per worker) and
  // the gap seen so far.
  void Restore(const std::vector<int64_t>& clocks, int64_t max_gap);

  // Workers whose clock is below `clock`, ascending.
  std::vector<int> Below(int64_t clock) const;
  // Workers whose clock differs from `clock`, ascending.
  std::vector<int> NotAt(int64_t clock) const;

 private:
  void NoteGap();

  std::vector<int64_t> clocks_;
  int64_t max_gap_ = 0;
};

}  // namespace pstrain::server

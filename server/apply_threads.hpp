// ApplyThreads: the shard's small pool for element-wise passes over a chunk
// (the update rule, the rank-ordered sum, decoding a compressed push).
//
// Every such pass computes value i from the i-th values of its arrays only
// (update_rule.hpp: "an element-wise pure function"), so the pool cuts the
// range [0, n) into contiguous parts, one per thread, and each value is
// computed by exactly the same float operations as with one thread: the
// weights are the same bits for any thread count. Parts start at multiples
// of 16 values (a 64-byte cache line of floats), so two threads never write
// one line; a range shorter than kMinPerThread values per thread uses fewer
// threads (for a small chunk, waking a thread costs more than it saves).
//
// ForRanges is called by the shard's one event loop only (not re-entrant);
// the callback runs on the caller (part 0) and on the pool's threads.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pstrain::server {

class ApplyThreads {
 public:
  // Values a thread takes at least (64K floats: 256 KiB).
  static constexpr size_t kMinPerThread = size_t{1} << 16;

  // threads >= 1: the caller and threads - 1 pool threads.
  explicit ApplyThreads(int threads);
  ~ApplyThreads();
  ApplyThreads(const ApplyThreads&) = delete;
  ApplyThreads& operator=(const ApplyThreads&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // The number of parts ForRanges(n, ...) uses.
  int Parts(size_t n) const;
  // Calls fn(part, begin, end) for consecutive ranges covering [0, n), one
  // per part, in parallel; returns when all have returned. `part` < Parts(n)
  // (a caller may keep per-part scratch).
  void ForRanges(size_t n, const std::function<void(int part, size_t begin, size_t end)>& fn);

 private:
  void Work(int index);
  static void Range(size_t n, int parts, int part, size_t* begin, size_t* end);

  std::mutex mutex_;  // guards everything below but workers_
  std::condition_variable wake_, done_;
  const std::function<void(int, size_t, size_t)>* job_ = nullptr;
  size_t n_ = 0;
  int parts_ = 0;
  int pending_ = 0;         // pool parts of the current job not yet finished
  unsigned generation_ = 0;  // bumped per job
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace pstrain::server

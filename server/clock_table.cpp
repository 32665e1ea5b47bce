#include "server/clock_table.hpp"

#include <algorithm>

#include "common/status.hpp"

namespace pstrain::server {

int64_t ClockTable::min() const { return *std::min_element(clocks_.begin(), clocks_.end()); }

int64_t ClockTable::max() const { return *std::max_element(clocks_.begin(), clocks_.end()); }

void ClockTable::Advance(int worker) {
  ++clocks_[static_cast<size_t>(worker)];
  NoteGap();
}

void ClockTable::Restore(const std::vector<int64_t>& clocks, int64_t max_gap) {
  PSTRAIN_CHECK(clocks.size() == clocks_.size());
  clocks_ = clocks;
  max_gap_ = max_gap;
  NoteGap();
}

void ClockTable::NoteGap() { max_gap_ = std::max(max_gap_, max() - min()); }

std::vector<int> ClockTable::Below(int64_t clock) const {
  std::vector<int> workers;
  for (int w = 0; w < num_workers(); ++w) {
    if (clocks_[static_cast<size_t>(w)] < clock) workers.push_back(w);
  }
  return workers;
}

std::vector<int> ClockTable::NotAt(int64_t clock) const {
  std::vector<int> workers;
  for (int w = 0; w < num_workers(); ++w) {
    if (clocks_[static_cast<size_t>(w)] != clock) workers.push_back(w);
  }
  return workers;
}

}  // namespace pstrain::server

// Seeded orders of a data set's items, the same on every platform (a
// Fisher-Yates shuffle on Rng::Below, not std::shuffle, whose algorithm the
// standard leaves open), so every worker of a job computes the same order.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

#include "common/rng.hpp"

namespace pstrain {

// 0..n-1, shuffled by `seed`. REQUIRES: 0 <= n < 2^32.
inline std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  Rng rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = rng.Below(static_cast<uint32_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

}  // namespace pstrain

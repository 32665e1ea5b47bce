// ClockTable (per-worker clocks, largest gap) and RankOrderedSum (the BSP
// sum in rank order whatever the arrival order).
#include "server/clock_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "server/rank_ordered_sum.hpp"

namespace pstrain::server {
namespace {

TEST(ClockTableTest, ClocksAndLargestGap) {
  ClockTable t(3);
  EXPECT_EQ(t.min(), 0);
  t.Advance(0);
  t.Advance(0);
  t.Advance(1);
  EXPECT_EQ(t.clocks(), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(t.min(), 0);
  EXPECT_EQ(t.max(), 2);
  EXPECT_EQ(t.max_gap(), 2);
  EXPECT_EQ(t.Below(2), (std::vector<int>{1, 2}));
  EXPECT_EQ(t.NotAt(1), (std::vector<int>{0, 2}));
  t.Advance(2);
  t.Advance(2);
  t.Advance(1);
  EXPECT_EQ(t.max() - t.min(), 0);
  EXPECT_EQ(t.max_gap(), 2);  // the largest seen, not the current one
  t.Restore({5, 5, 9}, 1);
  EXPECT_EQ(t.clock(2), 9);
  EXPECT_EQ(t.max_gap(), 4);
}

// Values where float addition order matters.
std::vector<std::vector<float>> Gradients() {
  return {{1e8f, 1.f, 0.5f}, {1.f, -1e8f, 0.25f}, {-1e8f, 3.f, 1e-8f}, {7.f, 1e8f, -0.75f}};
}

TEST(RankOrderedSumTest, EveryArrivalOrderGivesTheRankOrderSum) {
  const auto g = Gradients();
  std::vector<float> expected = g[0];
  for (size_t r = 1; r < g.size(); ++r) {
    for (size_t i = 0; i < 3; ++i) expected[i] += g[r][i];
  }
  std::vector<int> order = {0, 1, 2, 3};
  RankOrderedSum sum(4, {3});
  do {
    sum.Reset();
    for (size_t k = 0; k < order.size(); ++k) {
      EXPECT_EQ(sum.Add(0, order[k], g[static_cast<size_t>(order[k])].data()), k + 1 == 4);
    }
    ASSERT_TRUE(sum.complete(0));
    EXPECT_EQ(std::memcmp(sum.sum(0), expected.data(), 3 * sizeof(float)), 0);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(RankOrderedSumTest, ChunksAreIndependent) {
  RankOrderedSum sum(2, {1, 2});
  const float a[] = {1, 2}, b[] = {10, 20};
  EXPECT_FALSE(sum.Add(1, 1, b));
  EXPECT_FALSE(sum.Add(0, 0, a));
  EXPECT_FALSE(sum.complete(1));
  EXPECT_TRUE(sum.Add(1, 0, a));
  EXPECT_EQ(sum.sum(1)[1], 22.f);
  EXPECT_FALSE(sum.complete(0));
}

}  // namespace
}  // namespace pstrain::server

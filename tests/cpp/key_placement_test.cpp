#include "common/ps/key_placement.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace pstrain {
namespace {

TEST(KeyPlacementTest, ChunksCoverEveryParameterInOrder) {
  auto p = KeyPlacement::Create({10, 0, 7}, 2, 16);  // 4 values a chunk
  ASSERT_TRUE(p.ok());
  const auto& chunks = p->chunks();
  ASSERT_EQ(chunks.size(), 5u);  // 4+4+2, 4+3
  EXPECT_EQ(chunks[2].param, 0);
  EXPECT_EQ(chunks[2].offset, 8);
  EXPECT_EQ(chunks[2].length, 2);
  EXPECT_EQ(chunks[4].param, 2);
  EXPECT_EQ(chunks[4].offset, 4);
  EXPECT_EQ(chunks[4].length, 3);
  EXPECT_TRUE(p->param_chunks(1).empty());
}

TEST(KeyPlacementTest, BalancedWithinOneChunkAndDeterministic) {
  std::vector<int64_t> sizes = {500, 25000, 20, 400000, 500, 5000, 10};  // LeNet-like
  for (int shards = 1; shards <= 5; ++shards) {
    auto a = KeyPlacement::Create(sizes, shards, 4096);
    auto b = KeyPlacement::Create(sizes, shards, 4096);
    ASSERT_TRUE(a.ok());
    int64_t lo = INT64_MAX, hi = 0, biggest = 0;
    for (int s = 0; s < shards; ++s) {
      lo = std::min(lo, a->shard_load(s));
      hi = std::max(hi, a->shard_load(s));
      EXPECT_EQ(a->shard_chunks(s), b->shard_chunks(s));
    }
    for (const auto& c : a->chunks()) biggest = std::max(biggest, c.length);
    EXPECT_LE(hi - lo, biggest) << shards << " shards";
  }
}

TEST(KeyPlacementTest, Errors) {
  EXPECT_EQ(KeyPlacement::Create({1}, 0, 16).status().message(),
            "the number of server shards must be at least 1");
  EXPECT_EQ(KeyPlacement::Create({1}, 1, 2).status().message(),
            "chunk_bytes must be at least 4, got 2");
}

}  // namespace
}  // namespace pstrain

// ChunkStore: a shard's chunks, the update rule applied on chunk slices, and
// the per-version snapshot buffers served to pullers.
#include "server/chunk_store.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace pstrain::server {
namespace {

// Params of 6 and 2 values, 4 values a chunk: chunks {0: p0[0,4), 1: p0[4,6),
// 2: p1[0,2)}; with 2 shards, shard 0 holds {0} and shard 1 holds {1, 2}.
KeyPlacement Placement(int shards) { return KeyPlacement::Create({6, 2}, shards, 16).value(); }

optim::SolverHyper Sgd(float momentum) {
  optim::SolverHyper h;
  h.base_lr = 0.1f;
  h.momentum = momentum;
  return h;
}

TEST(ChunkStoreTest, HoldsTheShardsChunks) {
  auto store = ChunkStore::Create(Placement(2), 1, {{1, 1}, {1, 1}}, Sgd(0.9f));
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(store->chunk_ids(), (std::vector<uint32_t>{1, 2}));
  EXPECT_FALSE(store->Holds(0));
  EXPECT_FALSE(store->Holds(7));
  EXPECT_EQ(store->LocalIndex(2), 1);
  EXPECT_EQ(store->length(1), 2);
  EXPECT_EQ(store->history_slots(), 1);
  EXPECT_EQ(store->weights(2)[0], 0.f);
}

TEST(ChunkStoreTest, Errors) {
  EXPECT_EQ(ChunkStore::Create(Placement(1), 0, {{1, 1}}, Sgd(0)).status().message(),
            "ChunkStore: 1 parameter multipliers for 2 parameters");
  optim::SolverHyper bad = Sgd(0);
  bad.type = "Nope";
  EXPECT_FALSE(ChunkStore::Create(Placement(1), 0, {{1, 1}, {1, 1}}, bad).ok());
}

TEST(ChunkStoreTest, ApplyGradientUsesTheParamsMultipliers) {
  optim::SolverHyper hyper = Sgd(0.9f);
  hyper.weight_decay = 0.5f;
  // Param 1 (chunk 2): lr_mult 2, decay_mult 0.
  auto store = ChunkStore::Create(Placement(1), 0, {{1, 1}, {2, 0}}, hyper).value();
  store.SetWeights(0, std::vector<float>{1, 2, 3, 4});
  store.SetWeights(2, std::vector<float>{1, -1});
  const std::vector<float> g0 = {1, 1, 1, 1}, g2 = {0.5f, 0.25f};
  for (int step = 0; step < 2; ++step) {
    store.ApplyGradient(0, g0.data(), 0.5f, step);
    store.ApplyGradient(2, g2.data(), 1.f, step);
  }
  EXPECT_EQ(g0[0], 1.f);  // the caller's gradient is untouched
  // Chunk 0, w = 1: diff = 0.5 + 0.5 * w; v = 0.9 v + 0.1 diff; w -= v.
  double w = 1, v = 0;
  for (int step = 0; step < 2; ++step) {
    v = 0.9 * v + 0.1 * (0.5 + 0.5 * w);
    w -= v;
  }
  EXPECT_NEAR(store.weights(0)[0], w, 1e-6);
  EXPECT_NEAR(store.history(0, 0)[0], v, 1e-6);
  // Chunk 2, w = 1: no decay, rate 0.2: v1 = 0.1, v2 = 0.19.
  EXPECT_NEAR(store.weights(2)[0], 1 - 0.1 - 0.19, 1e-6);
  EXPECT_NEAR(store.weights(2)[1], -1 - 0.05 - 0.095, 1e-6);
}

TEST(ChunkStoreTest, SnapshotIsSharedPerVersionAndReused) {
  auto store = ChunkStore::Create(Placement(1), 0, {{1, 1}, {1, 1}}, Sgd(0)).value();
  store.SetWeights(1, std::vector<float>{3, 4});
  auto a = store.Snapshot(1);
  auto b = store.Snapshot(1);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(*a, (std::vector<float>{3, 4}));
  const float grad[] = {10, 10};
  store.ApplyGradient(1, grad, 1.f, 0);
  auto c = store.Snapshot(1);
  EXPECT_NE(c.get(), a.get());  // a is still held: a new buffer
  EXPECT_EQ(*a, (std::vector<float>{3, 4}));
  EXPECT_EQ(*c, (std::vector<float>{2, 3}));
  const std::vector<float>* old = a.get();
  a.reset();
  b.reset();
  store.ApplyGradient(1, grad, 1.f, 0);
  auto d = store.Snapshot(1);
  EXPECT_EQ(d.get(), old);  // the released buffer is reused
  EXPECT_EQ(*d, (std::vector<float>{1, 2}));
  EXPECT_EQ(*c, (std::vector<float>{2, 3}));
}

}  // namespace
}  // namespace pstrain::server

// ShardState's checkpoint barrier and Restore, initialisation, and valid
// messages that are wrong here (a future clock, a second init with other
// parameters) or duplicates, driven by scripted arrivals. Malformed and stray
// messages never reach the shard: shard_loop_test.cpp drops them at entry.
#include <gtest/gtest.h>

#include "server/shard_state.hpp"
#include "tests/cpp/shard_state_test_util.hpp"

namespace pstrain::server {
namespace {

using namespace test_support;  // NOLINT: the suite's scripted messages

TEST(ShardStateTest, CheckpointBarrierCutsOneGlobalClockAndRestores) {
  testing::TempDir dir;
  ShardConfig c = Config(ConsistencyMode::kSsp, 2, 3);
  c.snapshot_interval = 2;
  c.snapshot_prefix = dir / "job";
  Shard s(c);
  s.Send(Init(0, 1));
  const std::vector<uint32_t> all = {0, 1, 2};
  s.Send(Push(0, 0, all));
  s.Send(Push(0, 1, all));
  EXPECT_EQ(Count(s.Send(Pull(0, 2)), pstrain::PULL_REPLY), 0);  // within s, but a cut
  EXPECT_EQ(Count(s.Send(Push(1, 0, all)), pstrain::PULL_REPLY), 0);
  auto out = s.Send(Push(1, 1, all));
  const Outgoing* reply = Find(out, pstrain::PULL_REPLY, "w0");
  ASSERT_NE(reply, nullptr);
  const std::string path = dir / "job_iter_2.shard0.state";
  EXPECT_EQ(reply->header.text(), path);
  EXPECT_TRUE(std::filesystem::exists(path));
  const std::vector<float> at_cut = s.Weights();
  s.Send(Push(0, 2, all));  // worker 0 moves on; worker 1's pull still gets the cut's path
  out = s.Send(Pull(1, 2));
  ASSERT_NE(Find(out, pstrain::PULL_REPLY, "w1"), nullptr);
  EXPECT_EQ(Find(out, pstrain::PULL_REPLY, "w1")->header.text(), path);
  EXPECT_EQ(Count(s.Send(Pull(0, 3)), pstrain::PULL_REPLY), 1);
  EXPECT_TRUE(Find(s.Send(Pull(0, 3)), pstrain::PULL_REPLY)->header.text().empty());

  auto restored = ShardState::Restore(c, path);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  EXPECT_EQ(restored->version(), 2);
  EXPECT_EQ(restored->clocks().clocks(), (std::vector<int64_t>{2, 2}));
  const ChunkStore& store = *restored->store();
  for (uint32_t id = 0; id < 3; ++id) {
    auto w = store.weights(id);
    for (int64_t i = 0; i < Length(id); ++i) EXPECT_EQ(w[i], at_cut[Offset(id) + i]);
    EXPECT_NE(store.history(id, 0)[0], 0.f);
  }
  EXPECT_EQ(restored->Stats().staleness_histogram_size(),
            s.server.Stats().staleness_histogram_size());
  // The history too: one more identical push gives identical weights.
  Shard again(c);
  again.server = std::move(restored).value();
  Shard fresh(Config(ConsistencyMode::kSsp, 2, 3));
  // (replay the same run without checkpoints up to the cut)
  fresh.Send(Init(0, 1));
  for (int t = 0; t < 2; ++t) {
    fresh.Send(Push(0, t, all));
  }
  fresh.Send(Push(1, 0, all));
  fresh.Send(Push(1, 1, all));
  again.Send(Push(1, 2, all));
  fresh.Send(Push(1, 2, all));
  EXPECT_EQ(std::memcmp(again.Weights().data(), fresh.Weights().data(), kValues * sizeof(float)),
            0);
  // A restored shard does not cut iteration 2 again.
  EXPECT_TRUE(Find(again.Send(Pull(0, 2)), pstrain::PULL_REPLY)->header.text().empty());
}

TEST(ShardStateTest, RestoreRejectsAStateOfAnotherShardLayout) {
  testing::TempDir dir;
  Shard s(Config(ConsistencyMode::kBsp, 2));
  s.Send(Init(0, 1));
  const std::string path = dir / "x.state";
  ASSERT_TRUE(s.server.WriteCheckpoint(path).ok());
  EXPECT_EQ(
      ShardState::Restore(Config(ConsistencyMode::kBsp, 2, 0, 0, 2), path).status().message(),
      path + ": the state is for shard 0 of 1, this server is shard 0 of 2");
  EXPECT_EQ(ShardState::Restore(Config(ConsistencyMode::kBsp, 3), path).status().message(),
            path + ": the state has clocks of 2 workers, this job has 3");
  ShardConfig adam = Config(ConsistencyMode::kBsp, 2);
  adam.hyper.type = "Adam";
  EXPECT_EQ(ShardState::Restore(adam, path).status().message(),
            path + ": the state holds SGD history, this job's solver is Adam");
  EXPECT_TRUE(ShardState::Restore(Config(ConsistencyMode::kBsp, 2), path).ok());
  EXPECT_FALSE(ShardState::Restore(Config(ConsistencyMode::kBsp, 2), dir / "missing.state").ok());
}

TEST(ShardStateTest, InitTwice) {
  Shard s(Config(ConsistencyMode::kBsp, 1));
  s.Send(Init(0, 1));
  s.Send(Push(0, 0, {0, 1, 2}));
  const std::vector<float> after_step = s.Weights();
  auto out = s.Send(Init(0, 1, Params(), 100.f));  // worker 0 restarted: same metadata
  ASSERT_EQ(Count(out, pstrain::INIT_ACK), 1);
  EXPECT_EQ(out[0].header.version(), 1);
  EXPECT_EQ(s.Weights(), after_step);
  auto params = Params();
  params[1].set_lr_mult(2);
  out = s.Send(Init(0, 1, params));
  ASSERT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(out[0].header.text(),
            "its parameters differ from those this shard was initialized with");
  EXPECT_EQ(s.Weights(), after_step);
  EXPECT_EQ(s.server.Stats().bad_messages(), 1);
}

TEST(ShardStateTest, InitErrors) {
  Shard s(Config(ConsistencyMode::kBsp, 2, 0, 1, 2));
  // An INIT_PUSH is checked against the placement the shard builds from it.
  auto out = s.Send(Init(1, 2).Chunk(0, {1, 2, 3, 4}));
  ASSERT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(out[0].header.text(), "chunk 0 is held by shard 0, not shard 1");
  Message missing(pstrain::INIT_PUSH, 0, 0);
  for (const auto& p : Params()) *missing.header().add_params() = p;
  missing.Chunk(1, {5, 6});
  EXPECT_EQ(s.Send(std::move(missing))[0].header.text(), "it carries 1 of shard 1's 2 chunks");
  Message short_chunk(pstrain::INIT_PUSH, 0, 0);
  for (const auto& p : Params()) *short_chunk.header().add_params() = p;
  short_chunk.Chunk(1, {5}).Chunk(2, {0.5f, -0.5f});
  EXPECT_EQ(s.Send(std::move(short_chunk))[0].header.text(),
            "chunk 1: header says 1 values, the chunk has 2");
  Message stranger(pstrain::INIT_PUSH, 1, 0);
  EXPECT_EQ(s.Send(std::move(stranger))[0].header.text(),
            "only worker 0 sends the initial weights");
  Shard tiny(Config(ConsistencyMode::kBsp, 1, 0, 3, 4));  // 3 chunks, 4 shards
  EXPECT_EQ(tiny.Send(Init(1, 2))[0].header.text(),
            "shard 3 of 4 would hold no chunk: the net has 3 chunk(s) of at most 16 bytes; use at "
            "most that many server shards or a smaller chunk_bytes");
  EXPECT_FALSE(s.server.initialized());
}

TEST(ShardStateTest, PullBeforeInitWaitsPushBeforeInitFails) {
  Shard s(Config(ConsistencyMode::kAsp, 1));
  EXPECT_TRUE(s.Send(Pull(0, 0)).empty());
  auto out = s.Send(Push(0, 0, {0}));
  ASSERT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(out[0].header.text(), "push before the init push");
  EXPECT_EQ(out[0].header.clock(), 0);  // the answer names the request's clock
  out = s.Send(Init(0, 1));
  EXPECT_EQ(Count(out, pstrain::INIT_ACK), 1);
  ASSERT_EQ(Count(out, pstrain::PULL_REPLY), 1);
  EXPECT_EQ(Find(out, pstrain::PULL_REPLY)->header.clock(), 0);
  EXPECT_EQ(s.server.Stats().bad_messages(), 1);
}

TEST(ShardStateTest, WrongClockPushIsRejectedAndCounted) {
  Shard s(Config(ConsistencyMode::kSsp, 2, 1));
  s.Send(Init(0, 1));
  auto out = s.Send(Push(0, 1, {0}));
  ASSERT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(out[0].header.text(), "pushed iteration 1 but the worker's clock is 0");
  EXPECT_EQ(out[0].header.clock(), 1);
  EXPECT_EQ(s.Weights(), kInitial);
  EXPECT_EQ(s.server.Stats().bad_messages(), 1);
  ASSERT_FALSE(s.logs.empty());
  EXPECT_EQ(s.logs.back(),
            "shard 0: PUSH from worker 0 rejected: pushed iteration 1 but the worker's clock is 0");
  // BSP: a push of iteration t before step t-1 is applied.
  Shard b(Config(ConsistencyMode::kBsp, 2));
  b.Send(Init(0, 1));
  b.Send(Push(0, 0, {0, 1, 2}));
  EXPECT_EQ(b.Send(Push(0, 1, {0}))[0].header.text(),
            "pushed iteration 1 before step 0 was applied (version 0)");
  EXPECT_EQ(b.server.Stats().bad_messages(), 1);
  // Messages dropped before Handle are counted in the same place.
  s.server.CountBadMessage();
  EXPECT_EQ(s.server.Stats().bad_messages(), 2);
  EXPECT_EQ(s.Weights(), kInitial);
}

TEST(ShardStateTest, DuplicateChunksAreDroppedNeverAppliedTwice) {
  ShardConfig c = Config(ConsistencyMode::kSsp, 1, 0);
  c.hyper.momentum = 0;
  Shard s(c);
  s.Send(Init(0, 1));
  s.Send(Push(0, 0, {0}));
  auto out = s.Send(Push(0, 0, {0, 1}));  // chunk 0 again, chunk 1 new
  EXPECT_EQ(Count(out, pstrain::PUSH_ACK), 1);
  EXPECT_FLOAT_EQ(s.Weights()[0], kInitial[0] - 0.1f * Grad(0, 0, 0));
  EXPECT_FLOAT_EQ(s.Weights()[4], kInitial[4] - 0.1f * Grad(0, 0, 4));
  EXPECT_EQ(s.logs.back(), "shard 0: worker 0's chunk 0 of iteration 0 dropped: received before");
  s.Send(Push(0, 0, {2}));
  EXPECT_EQ(s.server.clocks().clock(0), 1);
  const std::vector<float> done = s.Weights();
  out = s.Send(Push(0, 0, {0, 1, 2}));  // a resend of a complete iteration
  EXPECT_EQ(Count(out, pstrain::PUSH_ACK), 1);
  EXPECT_EQ(s.Weights(), done);
  const pstrain::ShardStats stats = s.server.Stats();
  EXPECT_EQ(stats.duplicates_dropped(), 4);
  EXPECT_EQ(stats.bad_messages(), 0);
  EXPECT_EQ(stats.pushes_applied(), 1);
}

TEST(ShardStateTest, TickWarnsAboutLongWaits) {
  Shard s(Config(ConsistencyMode::kBsp, 3));
  s.Send(Init(0, 1));
  s.Send(Push(1, 0, {0, 1, 2}));
  s.Send(Push(2, 0, {0, 1}));
  s.Send(Pull(1, 1), kT0);
  s.logs.clear();
  s.server.Tick(kT0 + std::chrono::milliseconds(9999));
  EXPECT_TRUE(s.logs.empty());
  s.server.Tick(kT0 + std::chrono::seconds(10));
  ASSERT_EQ(s.logs.size(), 1u);
  EXPECT_EQ(s.logs[0],
            "shard 0: worker 1's pull for iteration 1 has waited 10.0 s for worker 0 (clock 0), "
            "worker 2 (clock 0)");
  s.server.Tick(kT0 + std::chrono::seconds(15));
  EXPECT_EQ(s.logs.size(), 1u);
  s.Send(Push(0, 0, {0, 1, 2}));
  s.server.Tick(kT0 + std::chrono::seconds(20));
  ASSERT_EQ(s.logs.size(), 2u);
  EXPECT_EQ(s.logs[1],
            "shard 0: worker 1's pull for iteration 1 has waited 20.0 s for worker 2 (clock 0)");
}

TEST(ShardStateTest, PullsOfOneVersionShareTheSnapshotBuffers) {
  Shard s(Config(ConsistencyMode::kAsp, 2));
  s.Send(Init(0, 1));
  auto a = s.Send(Pull(0, 0));
  auto b = s.Send(Pull(1, 0));
  ASSERT_EQ(a[0].payloads.size(), 3u);
  for (size_t c = 0; c < 3; ++c) EXPECT_EQ(a[0].payloads[c].get(), b[0].payloads[c].get());
  s.Send(Push(0, 0, {1}));
  auto d = s.Send(Pull(0, 1));
  EXPECT_EQ(d[0].payloads[0].get(), a[0].payloads[0].get());  // chunk 0 unchanged
  EXPECT_NE(d[0].payloads[1].get(), a[0].payloads[1].get());
  EXPECT_NE(*d[0].payloads[1], *a[0].payloads[1]);
}

TEST(ShardStateTest, HelloStatsShutdown) {
  Shard s(Config(ConsistencyMode::kSsp, 2, 2));
  auto out = s.Send(Hello(1, 2));
  ASSERT_EQ(Count(out, pstrain::HELLO_ACK), 1);
  EXPECT_EQ(out[0].peer, "w1");
  EXPECT_EQ(out[0].header.clock(), 0);
  EXPECT_EQ(out[0].header.text(), "ssp");
  EXPECT_EQ(out[0].header.role(), pstrain::SERVER);
  s.Send(Init(0, 1));
  s.Send(Push(1, 0, {0, 1, 2}));
  EXPECT_TRUE(s.Send(Pull(1, 4)).empty());  // deferred for the old peer
  out = s.Send(Hello(1, 2).Peer("w1-restarted"));
  EXPECT_EQ(out[0].header.clock(), 1);
  EXPECT_EQ(s.logs.back(), "shard 0: worker 1 reconnected (peer w1 -> w1-restarted)");
  EXPECT_TRUE(s.Send(Push(0, 0, {0, 1, 2})).size() == 1);  // the stale pull is gone
  out = s.Send(Message(pstrain::STATS, 0, 0, pstrain::CONTROL));
  ASSERT_EQ(Count(out, pstrain::STATS), 1);
  EXPECT_EQ(out[0].header.stats().pushes_applied(), 2);
  EXPECT_EQ(out[0].header.stats().bad_messages(), 0);
  EXPECT_TRUE(s.Send(Message(pstrain::HEARTBEAT, 0, 0)).empty());
  EXPECT_FALSE(s.server.done());
  EXPECT_EQ(Count(s.Send(Message(pstrain::SHUTDOWN, 0, 0, pstrain::CONTROL)), pstrain::SHUTDOWN),
            1);
  EXPECT_TRUE(s.server.done());
}

// A worker replaced after being cut off may come back under the same routing
// id; its HELLO still means the old process's deferred pulls must not be answered.
TEST(ShardStateTest, AHelloUnderTheSameRoutingIdDropsTheRanksDeferredPulls) {
  Shard s(Config(ConsistencyMode::kBsp, 2));
  s.Send(Hello(1, 2));
  s.Send(Init(0, 1));
  s.Send(Push(1, 0, {0, 1, 2}));
  EXPECT_EQ(Count(s.Send(Pull(1, 1)), pstrain::PULL_REPLY), 0);  // waits for worker 0
  s.Send(Hello(1, 2));                                           // the replacement, "w1" again
  EXPECT_EQ(s.logs.back(), "shard 0: worker 1 reconnected (peer w1 -> w1)");
  auto out = s.Send(Push(0, 0, {0, 1, 2}));                      // step 1 is applied
  EXPECT_EQ(Count(out, pstrain::PULL_REPLY), 0);                 // the old pull is gone
  EXPECT_EQ(Count(s.Send(Pull(1, 1)), pstrain::PULL_REPLY), 1);  // the new one is answered
}

TEST(ShardStateTest, RulesForNameTheJobAndTheShardsChunks) {
  ShardConfig c = Config(ConsistencyMode::kAsp, 2, 0, 1, 2);
  c.job_key = 42;
  Shard s(c);
  Message init = Init(1, 2);
  init.header().set_job_key(42);
  transport::ValidationRules rules = s.server.RulesFor(init.header());
  EXPECT_EQ(rules.receiver, pstrain::SERVER);
  EXPECT_EQ(rules.job_key, 42u);
  EXPECT_EQ(rules.num_workers, 2);
  EXPECT_EQ(rules.num_servers, 2);
  EXPECT_EQ(rules.placement, nullptr);  // not initialised yet
  ASSERT_EQ(Count(s.Send(std::move(init)), pstrain::INIT_ACK), 1);
  rules = s.server.RulesFor(Push(0, 0, {1}).header());
  EXPECT_EQ(rules.placement, s.server.placement());
  EXPECT_EQ(rules.shard, 1);
  EXPECT_EQ(rules.min_clock, 0);
  // An INIT_PUSH is checked against the placement it makes, not the current one.
  EXPECT_EQ(s.server.RulesFor(Init(1, 2).header()).placement, nullptr);
}

TEST(ShardStateTest, ConfigValidation) {
  ShardConfig c = Config(ConsistencyMode::kSsp, 2);
  EXPECT_TRUE(ValidateShardConfig(c).ok());
  c.shard = 1;
  EXPECT_EQ(ValidateShardConfig(c).message(), "shard must be in [0, 1), got 1");
  c = Config(ConsistencyMode::kSsp, 2);
  c.snapshot_interval = 5;
  EXPECT_EQ(ValidateShardConfig(c).message(),
            "snapshot_prefix must be given when snapshot_interval > 0");
  EXPECT_EQ(ParseConsistencyMode("ssp").value(), ConsistencyMode::kSsp);
  EXPECT_EQ(ParseConsistencyMode("sync").status().message(),
            "mode \"sync\" is not one of bsp, ssp, asp");
  EXPECT_STREQ(ModeName(ConsistencyMode::kAsp), "asp");
}

}  // namespace
}  // namespace pstrain::server

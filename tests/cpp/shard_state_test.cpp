// ShardState driven by scripted message arrivals: BSP aggregation (rank
// order, one step, arrival-order independent, chunk-wise pull replies),
// SSP/ASP bounds and staleness, the clip_gradients norm exchange between two
// shards, and the pull of a restarted worker whose chunks of the step landed.
#include "server/shard_state.hpp"

#include <gtest/gtest.h>

#include "tests/cpp/shard_state_test_util.hpp"

namespace pstrain::server {
namespace {

using namespace test_support;  // NOLINT: the suite's scripted messages

TEST(ShardStateTest, BspAppliesOneStepOfTheAverage) {
  Shard s(Config(ConsistencyMode::kBsp, 2));
  EXPECT_EQ(Count(s.Send(Init(0, 1)), pstrain::INIT_ACK), 1);
  for (int t = 0; t < 2; ++t) {
    for (int w : {1, 0}) {
      auto out = s.Send(Pull(w, t));
      ASSERT_EQ(Count(out, pstrain::PULL_REPLY), 1) << "t " << t;
      EXPECT_EQ(out[0].header.version(), t);
    }
    EXPECT_EQ(Count(s.Send(Push(1, t, {2, 0})), pstrain::PUSH_ACK), 1);
    EXPECT_EQ(s.server.version(), t);  // chunk 1 of worker 1 is missing
    s.Send(Push(0, t, {0, 1, 2}));
    EXPECT_EQ(s.server.version(), t);
    s.Send(Push(1, t, {1}));
    EXPECT_EQ(s.server.version(), t + 1);
  }
  const std::vector<double> want = HandBsp(2, 2);
  const std::vector<float> got = s.Weights();
  for (int i = 0; i < kValues; ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  const pstrain::ShardStats stats = s.server.Stats();
  EXPECT_EQ(stats.version(), 2);
  EXPECT_EQ(stats.pushes_applied(), 4);
  EXPECT_EQ(stats.staleness_histogram_size(), 1);
  EXPECT_EQ(stats.staleness_histogram(0), 4);
  EXPECT_EQ(stats.staleness_max(), 1);
  EXPECT_EQ(stats.bad_messages(), 0);
}

TEST(ShardStateTest, BspWeightsDoNotDependOnArrivalOrder) {
  // 3 workers, one message per (worker, chunk), shuffled differently each run.
  std::vector<float> first;
  std::mt19937 rng(7);
  for (int run = 0; run < 12; ++run) {
    Shard s(Config(ConsistencyMode::kBsp, 3));
    s.Send(Init(0, 1));
    for (int t = 0; t < 2; ++t) {
      std::vector<std::pair<int, uint32_t>> order;
      for (int w = 0; w < 3; ++w) {
        for (uint32_t id = 0; id < 3; ++id) order.emplace_back(w, id);
      }
      if (run > 0) std::shuffle(order.begin(), order.end(), rng);
      for (auto [w, id] : order) s.Send(Push(w, t, {id}, RoughGrad));
      ASSERT_EQ(s.server.version(), t + 1);
    }
    if (run == 0) {
      first = s.Weights();
    } else {
      EXPECT_EQ(std::memcmp(first.data(), s.Weights().data(), kValues * sizeof(float)), 0)
          << "run " << run;
    }
  }
}

TEST(ShardStateTest, BspPullWaitsForTheStepBefore) {
  // Each chunk goes out once its own step 0 is applied; the union of the
  // replies is the whole shard, the last part leaves at version 1.
  Shard s(Config(ConsistencyMode::kBsp, 2));
  s.Send(Init(0, 1));
  s.Send(Push(0, 0, {0, 1, 2}));
  EXPECT_EQ(Count(s.Send(Pull(0, 1)), pstrain::PULL_REPLY), 0);
  auto early = s.Send(Push(1, 0, {0, 1}));
  ASSERT_EQ(Count(early, pstrain::PULL_REPLY), 1);
  const Outgoing* part = Find(early, pstrain::PULL_REPLY);
  EXPECT_EQ(part->peer, "w0");
  EXPECT_EQ(part->header.clock(), 1);
  EXPECT_EQ(part->header.version(), 0);  // the shard's version when sent
  EXPECT_EQ(part->header.reply_chunks_total(), 3u);
  ASSERT_EQ(part->header.chunks_size(), 2);
  EXPECT_EQ(part->header.chunks(0).id(), 0u);
  EXPECT_EQ(part->header.chunks(1).id(), 1u);
  auto out = s.Send(Push(1, 0, {2}));
  ASSERT_EQ(Count(out, pstrain::PULL_REPLY), 1);
  const Outgoing* reply = Find(out, pstrain::PULL_REPLY);
  EXPECT_EQ(reply->peer, "w0");
  EXPECT_EQ(reply->header.clock(), 1);
  EXPECT_EQ(reply->header.version(), 1);
  EXPECT_EQ(reply->header.reply_chunks_total(), 3u);
  ASSERT_EQ(reply->header.chunks_size(), 1);
  EXPECT_EQ(reply->header.chunks(0).id(), 2u);
  EXPECT_EQ(reply->payloads.size(), 1u);
  EXPECT_EQ(part->payloads.size(), 2u);
  EXPECT_EQ(*part->payloads[1], (std::vector<float>{s.Weights()[4], s.Weights()[5]}));
  EXPECT_EQ(*reply->payloads[0], (std::vector<float>{s.Weights()[6], s.Weights()[7]}));
  EXPECT_EQ(Count(s.Send(Push(0, 1, {2})), pstrain::PULL_REPLY), 0);  // nothing sent twice
}

TEST(ShardStateTest, BspPullGetsTheEarlyChunkBeforeTheLateGradientsArrive) {
  Shard s(Config(ConsistencyMode::kBsp, 1));
  s.Send(Init(0, 1));
  EXPECT_EQ(Count(s.Send(Pull(0, 1)), pstrain::PULL_REPLY), 0);  // sent early
  // Chunk 0 (values 0..3) is pushed first, like a late layer's weights.
  auto out = s.Send(Push(0, 0, {0}));
  ASSERT_EQ(Count(out, pstrain::PULL_REPLY), 1);
  const Outgoing* early = Find(out, pstrain::PULL_REPLY);
  ASSERT_EQ(early->header.chunks_size(), 1);
  EXPECT_EQ(early->header.chunks(0).id(), 0u);
  const std::vector<double> stepped = HandBsp(1, 1);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ((*early->payloads[0])[static_cast<size_t>(i)], stepped[static_cast<size_t>(i)]);
  }
  EXPECT_EQ(s.server.version(), 0);
  // A barrier-free pull for an iteration further ahead gets nothing yet.
  EXPECT_EQ(Count(s.Send(Pull(0, 2)), pstrain::PULL_REPLY), 0);
  out = s.Send(Push(0, 0, {1, 2}));
  ASSERT_EQ(Count(out, pstrain::PULL_REPLY), 1);
  const Outgoing* rest = Find(out, pstrain::PULL_REPLY);
  EXPECT_EQ(rest->header.clock(), 1);
  ASSERT_EQ(rest->header.chunks_size(), 2);
  EXPECT_EQ(rest->header.chunks(0).id(), 1u);
  EXPECT_EQ(rest->header.chunks(1).id(), 2u);
  EXPECT_EQ(rest->header.version(), 1);
  for (int i = 4; i < kValues; ++i) {
    const size_t k = static_cast<size_t>(i);
    EXPECT_FLOAT_EQ((*rest->payloads[k < 6 ? 0 : 1])[k < 6 ? k - 4 : k - 6], stepped[k]);
  }
}

// Workers 0 (acts every round) and 1 (every third round) loop pull, push;
// every pull must be answered exactly when the bound holds.
void RunFastAndSlow(ConsistencyMode mode, int staleness) {
  SCOPED_TRACE(std::string(ModeName(mode)) + " s=" + std::to_string(staleness));
  Shard s(Config(mode, 2, staleness));
  s.Send(Init(0, 1));
  std::vector<int64_t> iter(2, 0), pushed(2, 0);
  std::vector<int> state(2, 0);  // 0: will pull, 1: pull deferred, 2: pulled
  int deferred = 0;
  auto ready = [&](int64_t t) {
    const int64_t lo = std::min(pushed[0], pushed[1]);
    return mode == ConsistencyMode::kAsp || lo >= t - staleness;
  };
  auto absorb = [&](const std::vector<Outgoing>& out) {
    for (const Outgoing& o : out) {
      if (o.header.type() != pstrain::PULL_REPLY) continue;
      const int w = o.peer == "w0" ? 0 : 1;
      EXPECT_EQ(state[static_cast<size_t>(w)], 1);
      EXPECT_TRUE(ready(o.header.clock()));
      state[static_cast<size_t>(w)] = 2;
    }
  };
  for (int round = 0; round < 40; ++round) {
    for (int w = 0; w < 2; ++w) {
      if (w == 1 && round % 3 != 2) continue;
      const size_t k = static_cast<size_t>(w);
      if (state[k] == 0) {
        const bool expect_answer = ready(iter[k]);
        state[k] = 1;
        absorb(s.Send(Pull(w, iter[k])));
        EXPECT_EQ(state[k] == 2, expect_answer) << "worker " << w << " iteration " << iter[k];
        deferred += state[k] == 1;
      } else if (state[k] == 2) {
        auto out = s.Send(Push(w, iter[k], {0, 1, 2}));
        ++pushed[k];  // complete when Handle returns, before any reply it releases
        absorb(out);
        ++iter[k];
        state[k] = 0;
      }
      const int64_t gap = std::max(pushed[0], pushed[1]) - std::min(pushed[0], pushed[1]);
      if (mode == ConsistencyMode::kSsp) {
        EXPECT_LE(gap, staleness + 1);
      }
    }
  }
  const pstrain::ShardStats stats = s.server.Stats();
  if (mode == ConsistencyMode::kSsp) {
    EXPECT_GT(deferred, 0);
    EXPECT_EQ(stats.staleness_max(), staleness + 1);
  } else {
    EXPECT_EQ(deferred, 0);
    EXPECT_GT(stats.staleness_max(), 4);
  }
  EXPECT_EQ(stats.pushes_applied(), pushed[0] + pushed[1]);
  EXPECT_EQ(stats.version(), (pushed[0] + pushed[1]) / 2);
}

TEST(ShardStateTest, SspAnswersAPullExactlyWhenEveryClockIsWithinTheBound) {
  for (int s : {0, 1, 3}) RunFastAndSlow(ConsistencyMode::kSsp, s);
}

TEST(ShardStateTest, AspNeverDefers) { RunFastAndSlow(ConsistencyMode::kAsp, 0); }

TEST(ShardStateTest, SspStalenessHistogram) {
  Shard s(Config(ConsistencyMode::kSsp, 2, 1));
  s.Send(Init(0, 1));
  const std::vector<uint32_t> all = {0, 1, 2};
  s.Send(Pull(0, 0));
  s.Send(Pull(1, 0));
  s.Send(Push(0, 0, all));                                       // 0 - 0: staleness 0, version 0
  EXPECT_EQ(Count(s.Send(Pull(0, 1)), pstrain::PULL_REPLY), 1);  // served version 0
  s.Send(Push(0, 1, all));                                       // 0 - 0: 0, version 1
  EXPECT_EQ(Count(s.Send(Pull(0, 2)), pstrain::PULL_REPLY), 0);  // clock gap would be 3
  auto out = s.Send(Push(1, 0, all));                            // 1 - 0: 1, version 1
  ASSERT_NE(Find(out, pstrain::PULL_REPLY, "w0"), nullptr);      // served version 1
  EXPECT_EQ(Find(out, pstrain::PULL_REPLY, "w0")->header.version(), 1);
  s.Send(Pull(1, 1));       // served version 1
  s.Send(Push(1, 1, all));  // 1 - 1: 0, version 2
  s.Send(Push(0, 2, all));  // 2 - 1: 1, version 2
  const pstrain::ShardStats stats = s.server.Stats();
  EXPECT_EQ(
      std::vector<int64_t>(stats.staleness_histogram().begin(), stats.staleness_histogram().end()),
      (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(stats.version(), 2);
  EXPECT_EQ(stats.staleness_max(), 2);
  EXPECT_EQ(std::vector<int64_t>(stats.worker_clocks().begin(), stats.worker_clocks().end()),
            (std::vector<int64_t>{3, 2}));
}

TEST(ShardStateTest, SspAppliesEachPushOnArrivalScaledByOneOverW) {
  ShardConfig c = Config(ConsistencyMode::kSsp, 2, 1);
  c.hyper.momentum = 0;
  Shard s(c);
  s.Send(Init(0, 1));
  s.Send(Push(1, 0, {0}));
  EXPECT_FLOAT_EQ(s.Weights()[0], kInitial[0] - 0.1f * 0.5f * Grad(1, 0, 0));
  EXPECT_FLOAT_EQ(s.Weights()[4], kInitial[4]);  // chunk 1 not pushed yet
}

// Delivers NORM_* messages between shard 0 and shard 1 until none is left.
void Route(std::vector<Outgoing> out, int from, Shard& s0, Shard& s1) {
  for (Outgoing& o : out) {
    if (o.to == Outgoing::To::kPeer) continue;
    Message m(o.header.type(), from, o.header.clock(), pstrain::SERVER);
    m.header().set_sum_squares(o.header.sum_squares());
    if (o.to == Outgoing::To::kCoordinator) {
      ASSERT_EQ(from, 1);
      Route(s0.Send(std::move(m)), 0, s0, s1);
    } else {
      ASSERT_EQ(from, 0);
      Route(s1.Send(std::move(m)), 1, s0, s1);
    }
  }
}

TEST(ShardStateTest, ClipGradientsOverTwoShardsEqualsOneShard) {
  auto clipped = [](ShardConfig c) {
    c.hyper.clip_gradients = 0.5f;
    c.hyper.momentum = 0.f;
    return c;
  };
  Shard one(clipped(Config(ConsistencyMode::kBsp, 2)));
  Shard s0(clipped(Config(ConsistencyMode::kBsp, 2, 0, 0, 2)));
  Shard s1(clipped(Config(ConsistencyMode::kBsp, 2, 0, 1, 2)));
  one.Send(Init(0, 1));
  s0.Send(Init(0, 2));
  s1.Send(Init(1, 2));
  for (int t = 0; t < 2; ++t) {
    for (int w : {1, 0}) {
      one.Send(Push(w, t, {0, 1, 2}));
      Route(s1.Send(Push(w, t, {1, 2})), 1, s0, s1);
      EXPECT_EQ(s1.server.version(), t);  // needs the total from server 0
      Route(s0.Send(Push(w, t, {0})), 0, s0, s1);
    }
    ASSERT_EQ(one.server.version(), t + 1);
    ASSERT_EQ(s0.server.version(), t + 1);
    ASSERT_EQ(s1.server.version(), t + 1);
  }
  const std::vector<float> a = one.Weights(), b0 = s0.Weights(), b1 = s1.Weights();
  for (int i = 0; i < kValues; ++i) EXPECT_EQ(a[i], i < 4 ? b0[i] : b1[i]) << i;
  // By hand: the averaged gradient's norm is above 0.5 in both steps, so it
  // is scaled to norm 0.5.
  std::vector<double> x(kInitial.begin(), kInitial.end());
  for (int t = 0; t < 2; ++t) {
    double ss = 0;
    for (int i = 0; i < kValues; ++i) ss += std::pow((Grad(0, t, i) + Grad(1, t, i)) / 2, 2);
    ASSERT_GT(ss, 0.25);
    for (int i = 0; i < kValues; ++i) {
      x[i] -= 0.1 * (Grad(0, t, i) + Grad(1, t, i)) / 2 * 0.5 / std::sqrt(ss);
    }
  }
  for (int i = 0; i < kValues; ++i) EXPECT_NEAR(a[i], x[i], 1e-6) << i;
}

TEST(ShardStateTest, NormMessagesOnlyWhenClipping) {
  Shard s(Config(ConsistencyMode::kBsp, 1, 0, 0, 2));
  s.Send(Init(0, 2));
  Message m(pstrain::NORM_PARTIAL, 1, 0, pstrain::SERVER);
  m.header().set_sum_squares(1);
  EXPECT_EQ(s.Send(std::move(m))[0].header.text(),
            "no gradient norms are exchanged (bsp with clip_gradients only, after init)");
  EXPECT_EQ(s.Weights()[0], kInitial[0]);
}

// The values of every chunk of a PULL_REPLY, by flat index.
std::vector<float> ReplyValues(const Outgoing& reply) {
  std::vector<float> v(kValues, NAN);
  for (int i = 0; i < reply.header.chunks_size(); ++i) {
    const uint32_t id = reply.header.chunks(i).id();
    const std::vector<float>& values = *reply.payloads[static_cast<size_t>(i)];
    std::copy(values.begin(), values.end(), v.begin() + Offset(id));
  }
  return v;
}

// Worker 1 is killed after pushing chunk 0 of iteration 1, which lands (worker
// 0 pushed all of it) before the rest of step 1; its restarted process says
// HELLO, pulls iteration 1 and pushes all of it again. The pull must bring the
// weights of iteration 1 -- chunk 0 as it was before step 1, not after -- so
// that the chunks its old process did not push get the same gradient as
// without the kill, and the run ends bit for bit where it ends without it.
TEST(ShardStateTest, BspRestartedWorkerPullsTheStepItResumesAtEvenWhereItsChunksLanded) {
  Shard clean(Config(ConsistencyMode::kBsp, 2));
  Shard s(Config(ConsistencyMode::kBsp, 2));
  for (Shard* shard : {&clean, &s}) {
    shard->Send(Init(0, 1));
    shard->Send(Hello(0, 2));
    shard->Send(Hello(1, 2));
    shard->Send(Push(0, 0, {0, 1, 2}));
    shard->Send(Push(1, 0, {0, 1, 2}));
    ASSERT_EQ(shard->server.version(), 1);
  }
  const Outgoing* reply = nullptr;
  auto pulled = clean.Send(Pull(1, 1));
  ASSERT_NE(reply = Find(pulled, pstrain::PULL_REPLY), nullptr);
  const std::vector<float> iteration1 = ReplyValues(*reply);
  clean.Send(Push(0, 1, {0, 1, 2}));
  clean.Send(Push(1, 1, {0, 1, 2}));
  ASSERT_EQ(clean.server.version(), 2);

  s.Send(Pull(1, 1));  // the killed process's pull, answered
  s.Send(Push(0, 1, {0, 1, 2}));
  s.Send(Push(1, 1, {0}));  // chunk 0 of step 1 lands: both gradients are in
  ASSERT_EQ(s.server.version(), 1);
  const std::vector<double> landed = HandBsp(2, 2);
  EXPECT_FLOAT_EQ(s.Weights()[0], static_cast<float>(landed[0]));
  // The restarted process.
  auto hello = s.Send(Hello(1, 2).Peer("w1-again"));
  ASSERT_NE(reply = Find(hello, pstrain::HELLO_ACK), nullptr);
  EXPECT_EQ(reply->header.clock(), 1);  // iteration 1 is not completely pushed
  pulled = s.Send(Pull(1, 1).Peer("w1-again"));
  ASSERT_NE(reply = Find(pulled, pstrain::PULL_REPLY, "w1-again"), nullptr);
  ASSERT_EQ(reply->header.chunks_size(), 3);
  const std::vector<float> restarted = ReplyValues(*reply);
  for (int i = 0; i < kValues; ++i) {
    EXPECT_EQ(restarted[static_cast<size_t>(i)], iteration1[static_cast<size_t>(i)])
        << "value " << i << " of iteration 1";
  }
  // Its push of iteration 1 again: chunk 0 is a duplicate, 1 and 2 complete the step.
  s.Send(Push(1, 1, {0, 1, 2}).Peer("w1-again"));
  EXPECT_EQ(s.server.version(), 2);
  EXPECT_EQ(s.server.Stats().duplicates_dropped(), 1);
  EXPECT_EQ(s.Weights(), clean.Weights());
  // The next pulls get step 1's weights everywhere, as without the kill.
  pulled = s.Send(Pull(1, 2).Peer("w1-again"));
  ASSERT_NE(reply = Find(pulled, pstrain::PULL_REPLY), nullptr);
  EXPECT_EQ(ReplyValues(*reply), clean.Weights());
}

}  // namespace
}  // namespace pstrain::server

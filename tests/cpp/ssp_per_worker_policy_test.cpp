// The worked example of a consistency policy (server/policies/ssp_per_worker.cpp):
// ssp with one staleness bound per worker; and the registry that picks it.
#include <algorithm>
#include <string>
#include <vector>

#include "server/consistency_policy.hpp"
#include "tests/cpp/shard_state_test_util.hpp"

namespace pstrain::server {
namespace {

using namespace test_support;

ShardConfig PerWorker(std::vector<int> bounds) {
  ShardConfig c = Config(ConsistencyMode::kSsp, static_cast<int>(bounds.size()), /*staleness=*/0);
  c.staleness_per_worker = std::move(bounds);
  return c;
}

bool Answered(const std::vector<Outgoing>& out, int w) {
  return Find(out, pstrain::PULL_REPLY, "w" + std::to_string(w)) != nullptr;
}

// Worker 2 never pushes: worker w's pulls are answered up to iteration s_w and
// held from s_w + 1 on; when worker 2 pushes, the held pulls within the bound go.
TEST(SspPerWorkerPolicyTest, AWorkerWaitsExactlyWhenMoreThanItsOwnBoundAhead) {
  Shard s(PerWorker({0, 2, 5}));
  s.Send(Init(0, 1));
  for (int w = 0; w < 2; ++w) {
    const int bound = w == 0 ? 0 : 2;
    for (int64_t t = 0;; ++t) {
      const bool answered = Answered(s.Send(Pull(w, t)), w);
      EXPECT_EQ(answered, t <= bound) << "worker " << w << " iteration " << t;
      if (!answered) break;
      s.Send(Push(w, t, {0, 1, 2}));
    }
  }
  // Clocks 1, 3, 0: worker 0's pull for 1 waits (1 - 0 > 0), worker 1's for 3 (3 - 0 > 2).
  EXPECT_EQ(s.server.clocks().clocks(), (std::vector<int64_t>{1, 3, 0}));
  EXPECT_TRUE(Answered(s.Send(Pull(2, 0)), 2));
  const std::vector<Outgoing> out = s.Send(Push(2, 0, {0, 1, 2}));  // slowest clock now 1
  EXPECT_TRUE(Answered(out, 0));
  EXPECT_TRUE(Answered(out, 1));
  // Worker 2 at 1 with bound 5 runs ahead until it is 6 past the slowest (1).
  for (int64_t t = 1; t <= 7; ++t) {
    const bool answered = Answered(s.Send(Pull(2, t)), 2);
    EXPECT_EQ(answered, t <= 6) << "worker 2 iteration " << t;
    if (!answered) break;
    s.Send(Push(2, t, {0, 1, 2}));
  }
  EXPECT_EQ(s.server.Stats().staleness_max(), 6);  // 7 - 1: s_2 + 1
}

// Three workers at three speeds: every pull is answered exactly when the
// slowest clock is >= t - s_w, and no worker gets more than s_w + 1 ahead.
TEST(SspPerWorkerPolicyTest, ScheduleHoldsEachWorkerToItsOwnBound) {
  const std::vector<int> bound = {0, 1, 3};
  const std::vector<int> every = {1, 2, 5};  // worker w acts every every[w] rounds
  Shard s(PerWorker(bound));
  s.Send(Init(0, 1));
  std::vector<int64_t> iter(3, 0), pushed(3, 0);
  std::vector<int> state(3, 0);  // 0: will pull, 1: pull deferred, 2: pulled
  std::vector<int> deferred(3, 0);
  auto slowest = [&] { return *std::min_element(pushed.begin(), pushed.end()); };
  auto ready = [&](int w, int64_t t) { return slowest() >= t - bound[static_cast<size_t>(w)]; };
  auto absorb = [&](const std::vector<Outgoing>& out) {
    for (const Outgoing& o : out) {
      if (o.header.type() != pstrain::PULL_REPLY) continue;
      const int w = o.peer[1] - '0';
      EXPECT_EQ(state[static_cast<size_t>(w)], 1);
      EXPECT_TRUE(ready(w, o.header.clock())) << "worker " << w;
      state[static_cast<size_t>(w)] = 2;
    }
  };
  for (int round = 0; round < 60; ++round) {
    for (int w = 0; w < 3; ++w) {
      const size_t k = static_cast<size_t>(w);
      if (round % every[k] != 0) continue;
      if (state[k] == 0) {
        const bool expect_answer = ready(w, iter[k]);
        state[k] = 1;
        absorb(s.Send(Pull(w, iter[k])));
        EXPECT_EQ(state[k] == 2, expect_answer) << "worker " << w << " iteration " << iter[k];
        deferred[k] += state[k] == 1;
      } else if (state[k] == 2) {
        auto out = s.Send(Push(w, iter[k], {0, 1, 2}));
        ++pushed[k];
        absorb(out);
        ++iter[k];
        state[k] = 0;
      }
      for (int v = 0; v < 3; ++v) {
        EXPECT_LE(pushed[static_cast<size_t>(v)] - slowest(), bound[static_cast<size_t>(v)] + 1);
      }
    }
  }
  EXPECT_GT(deferred[0], 0);
  EXPECT_GT(deferred[1], 0);
  EXPECT_EQ(deferred[2], 0);  // the slowest is never ahead
  EXPECT_EQ(s.server.Stats().pushes_applied(), pushed[0] + pushed[1] + pushed[2]);
}

TEST(SspPerWorkerPolicyTest, BadBoundsAreRefusedNamingTheFlag) {
  ShardConfig c = PerWorker({1, 2});
  c.mode = ConsistencyMode::kAsp;
  EXPECT_EQ(ValidateShardConfig(c).message(),
            "--staleness-per-worker applies to ssp only, the mode is asp");
  c = PerWorker({1, 2});
  c.num_workers = 3;
  EXPECT_EQ(ValidateShardConfig(c).message(),
            "--staleness-per-worker has 2 bounds for 3 workers (one per worker)");
  EXPECT_EQ(ValidateShardConfig(PerWorker({1, -1})).message(),
            "--staleness-per-worker: worker 1's bound must be >= 0, got -1");
  c = PerWorker({1, 2});
  c.methods.elastic = true;
  EXPECT_EQ(ValidateShardConfig(c).message(), "--staleness-per-worker takes no --elastic");
  EXPECT_TRUE(ValidateShardConfig(PerWorker({1, 2})).ok());

  EXPECT_EQ(ParseStalenessList("2,4").value(), (std::vector<int>{2, 4}));
  EXPECT_EQ(ParseStalenessList("7").value(), (std::vector<int>{7}));
  for (const std::string bad : {"", "2,", ",2", "2;4", "2,x", "2,,4"}) {
    EXPECT_EQ(ParseStalenessList(bad).status().message(),
              "--staleness-per-worker: \"" + bad + "\" is not a list of integers (as 2,4)")
        << bad;
  }
}

TEST(PolicyRegistryTest, ComposesTheBaseAndItsWrappersByName) {
  const std::vector<std::string> names = PolicyRegistry::Global().Names();
  EXPECT_EQ(names, (std::vector<std::string>{"asp", "backup_workers", "bsp", "dc_asgd", "elastic",
                                             "ssp", "ssp_per_worker", "staleness_lr",
                                             "step_gate"}));
  ShardConfig c = Config(ConsistencyMode::kBsp, 3);
  EXPECT_EQ(ShardState(c).policy_names(), (std::vector<std::string>{"bsp"}));
  c.methods.backup_workers = 1;
  EXPECT_EQ(ShardState(c).policy_names(), (std::vector<std::string>{"backup_workers"}));
  c = Config(ConsistencyMode::kAsp, 2);
  c.methods.dc_lambda = 0.1f;
  c.methods.staleness_lr = true;
  EXPECT_EQ(ShardState(c).policy_names(),
            (std::vector<std::string>{"asp", "staleness_lr", "dc_asgd"}));
  c = PerWorker({0, 3});
  c.methods.staleness_lr = true;
  EXPECT_EQ(ShardState(c).policy_names(),
            (std::vector<std::string>{"ssp_per_worker", "staleness_lr"}));
  c = Config(ConsistencyMode::kSsp, 2, 1);
  c.methods.elastic = true;
  EXPECT_EQ(ShardState(c).policy_names(), (std::vector<std::string>{"elastic"}));
}

// The averaging scale of every policy: clip / (gradients * iter_size).
TEST(PolicyRegistryTest, AveragingScale) {
  EXPECT_EQ(AveragingScale(4, 2), 0.125f);
  EXPECT_EQ(AveragingScale(3, 1, 0.5f), 0.5f / 3.f);
  EXPECT_EQ(AveragingScale(1, 1), 1.f);
}

}  // namespace
}  // namespace pstrain::server

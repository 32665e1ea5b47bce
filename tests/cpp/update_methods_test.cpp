// Research update methods (server/update_methods.hpp) against hand-computed
// updates: backup workers in bsp, the staleness-aware rate and DC-ASGD (both
// variants) in asp, driven through ShardState with scripted messages.
#include "server/update_methods.hpp"

#include <gtest/gtest.h>

#include "tests/cpp/shard_state_test_util.hpp"

namespace pstrain::server {
namespace {

using namespace test_support;  // NOLINT: the suite's scripted messages

const std::vector<uint32_t> kAll = {0, 1, 2};

ShardConfig PlainSgd(ConsistencyMode mode, int workers) {
  ShardConfig c = Config(mode, workers);
  c.hyper.momentum = 0;  // x -= 0.1 * scale * g: easy to follow by hand
  return c;
}

TEST(UpdateMethodsTest, StalenessScaleIsOneOverMaxOneStaleness) {
  EXPECT_EQ(StalenessScale(0), 1.f);
  EXPECT_EQ(StalenessScale(1), 1.f);
  EXPECT_EQ(StalenessScale(2), 0.5f);
  EXPECT_EQ(StalenessScale(4), 0.25f);
}

TEST(UpdateMethodsTest, DelayCompensationByHand) {
  std::vector<float> g = {0.5f, -2.f, 1.f};
  const std::vector<float> now = {1.f, 1.f, 3.f}, pulled = {0.f, 2.f, 3.f};
  DelayCompensate(g.data(), now.data(), pulled.data(), 3, 0.5f);
  // 0.5 + 0.5*0.25*1 = 0.625; -2 + 0.5*4*(-1) = -4; 1 + 0 = 1
  EXPECT_EQ(g, (std::vector<float>{0.625f, -4.f, 1.f}));
  std::vector<float> a = {2.f}, ms = {3.f};
  const std::vector<float> n1 = {1.5f}, p1 = {1.f};
  DelayCompensateAdaptive(a.data(), n1.data(), p1.data(), ms.data(), 1, 1.f, 0.5f, 0.f);
  // ms = 0.5*3 + 0.5*4 = 3.5; lambda = 1/sqrt(3.5); a = 2 + lambda*4*0.5
  EXPECT_FLOAT_EQ(ms[0], 3.5f);
  EXPECT_FLOAT_EQ(a[0], 2.f + 2.f / std::sqrt(3.5f));
}

TEST(UpdateMethodsTest, ValidationNamesTheFlag) {
  UpdateMethods m;
  m.backup_workers = 2;
  EXPECT_NE(ValidateUpdateMethods(m, ConsistencyMode::kBsp, 2).message().find("--backup-workers"),
            std::string::npos);
  EXPECT_FALSE(ValidateUpdateMethods(m, ConsistencyMode::kAsp, 3).ok());
  EXPECT_TRUE(ValidateUpdateMethods(m, ConsistencyMode::kBsp, 3).ok());
  m = {};
  m.staleness_lr = true;
  EXPECT_FALSE(ValidateUpdateMethods(m, ConsistencyMode::kBsp, 2).ok());
  EXPECT_TRUE(ValidateUpdateMethods(m, ConsistencyMode::kSsp, 2).ok());
  m = {};
  m.dc_lambda = -1;
  EXPECT_NE(ValidateUpdateMethods(m, ConsistencyMode::kAsp, 2).message().find("--dc-lambda"),
            std::string::npos);
  m.dc_lambda = 0.1f;
  m.dc_momentum = 1.f;
  EXPECT_FALSE(ValidateUpdateMethods(m, ConsistencyMode::kAsp, 2).ok());
  ShardConfig c = PlainSgd(ConsistencyMode::kBsp, 2);
  c.methods.backup_workers = 2;
  EXPECT_FALSE(ValidateShardConfig(c).ok());
}

TEST(UpdateMethodsTest, BackupWorkersTakeTheFirstWMinusBAndDropTheRest) {
  ShardConfig c = PlainSgd(ConsistencyMode::kBsp, 3);
  c.methods.backup_workers = 1;
  Shard s(c);
  s.Send(Init(0, 1));
  // Step 0: workers 2 and 0 arrive first; worker 1's whole push comes late.
  s.Send(Push(2, 0, kAll));
  EXPECT_EQ(s.server.version(), 0);
  s.Send(Push(0, 0, kAll));
  EXPECT_EQ(s.server.version(), 1);
  std::vector<double> x(kInitial.begin(), kInitial.end());
  for (int i = 0; i < kValues; ++i) x[i] -= 0.1 * (Grad(0, 0, i) + Grad(2, 0, i)) / 2;
  auto late = s.Send(Push(1, 0, kAll));
  EXPECT_EQ(Count(late, pstrain::PUSH_ACK), 1);
  EXPECT_EQ(Count(late, pstrain::ERROR), 0);
  EXPECT_EQ(s.server.clocks().clock(1), 1);  // its iteration is done, dropped
  std::vector<float> got = s.Weights();
  for (int i = 0; i < kValues; ++i) EXPECT_NEAR(got[i], x[i], 1e-6) << i;
  // Step 1, chunk by chunk: chunk 0 takes workers 1 and 0, chunks 1 and 2
  // take workers 2 and 0.
  s.Send(Push(1, 1, {0}));
  s.Send(Push(0, 1, {0}));
  s.Send(Push(2, 1, kAll));  // its chunk 0 is refused
  EXPECT_EQ(s.server.version(), 1);
  s.Send(Push(0, 1, {1, 2}));
  EXPECT_EQ(s.server.version(), 2);
  s.Send(Push(1, 1, {1, 2}));  // step 1 applied: dropped
  for (int i = 0; i < kValues; ++i) {
    const int other = i < 4 ? 1 : 2;
    x[i] -= 0.1 * (Grad(0, 1, i) + Grad(other, 1, i)) / 2;
  }
  got = s.Weights();
  for (int i = 0; i < kValues; ++i) EXPECT_NEAR(got[i], x[i], 1e-6) << i;
  const pstrain::ShardStats stats = s.server.Stats();
  EXPECT_EQ(stats.backup_dropped(), 3 + 1 + 2);
  EXPECT_EQ(stats.pushes_applied(), 4);
  EXPECT_EQ(stats.bad_messages(), 0);
  EXPECT_EQ(std::vector<int64_t>(stats.worker_clocks().begin(), stats.worker_clocks().end()),
            (std::vector<int64_t>{2, 2, 2}));
}

TEST(UpdateMethodsTest, BackupSumDependsOnlyOnWhichRanksCameFirst) {
  std::vector<float> first;
  std::mt19937 rng(3);
  for (int run = 0; run < 8; ++run) {
    ShardConfig c = Config(ConsistencyMode::kBsp, 3);
    c.methods.backup_workers = 1;
    Shard s(c);
    s.Send(Init(0, 1));
    std::vector<std::pair<int, uint32_t>> order;
    for (int w : {0, 2}) {
      for (uint32_t id : kAll) order.emplace_back(w, id);
    }
    if (run > 0) std::shuffle(order.begin(), order.end(), rng);
    for (auto [w, id] : order) s.Send(Push(w, 0, {id}, RoughGrad));
    s.Send(Push(1, 0, kAll, RoughGrad));
    ASSERT_EQ(s.server.version(), 1);
    if (run == 0) {
      first = s.Weights();
    } else {
      EXPECT_EQ(std::memcmp(first.data(), s.Weights().data(), kValues * sizeof(float)), 0) << run;
    }
  }
}

TEST(UpdateMethodsTest, BackupPullWaitsForThePullersOwnPush) {
  ShardConfig c = PlainSgd(ConsistencyMode::kBsp, 2);
  c.methods.backup_workers = 1;
  Shard s(c);
  s.Send(Init(0, 1));
  s.Send(Push(0, 0, kAll));
  EXPECT_EQ(s.server.version(), 1);
  EXPECT_EQ(Count(s.Send(Pull(0, 1)), pstrain::PULL_REPLY), 1);
  // Worker 1 is still in its backward of iteration 0: nothing it still reads goes out.
  EXPECT_EQ(Count(s.Send(Pull(1, 1)), pstrain::PULL_REPLY), 0);
  auto part = s.Send(Push(1, 0, {2}));
  const Outgoing* reply = Find(part, pstrain::PULL_REPLY, "w1");
  ASSERT_NE(reply, nullptr);
  ASSERT_EQ(reply->header.chunks_size(), 1);
  EXPECT_EQ(reply->header.chunks(0).id(), 2u);
  auto rest = s.Send(Push(1, 0, {0, 1}));
  reply = Find(rest, pstrain::PULL_REPLY, "w1");
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(reply->header.chunks_size(), 2);
  EXPECT_EQ(s.server.Stats().backup_dropped(), 3);
}

TEST(UpdateMethodsTest, BackupWorkersMayNotPushTheFuture) {
  ShardConfig c = PlainSgd(ConsistencyMode::kBsp, 2);
  c.methods.backup_workers = 1;
  Shard s(c);
  s.Send(Init(0, 1));
  s.Send(Push(0, 0, kAll));
  auto out = s.Send(Push(0, 2, kAll));
  EXPECT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(s.server.Stats().bad_messages(), 1);
}

// Worker 1 pushes four fresh iterations (version 2 with W = 2); then worker 0
// pushes a gradient computed on version 0: staleness 2.
std::vector<float> StaleAsp(const ShardConfig& c) {
  Shard s(c);
  s.Send(Init(0, 1));
  s.Send(Pull(0, 0));
  for (int t = 0; t < 4; ++t) {
    s.Send(Pull(1, t));
    s.Send(Push(1, t, kAll));
  }
  EXPECT_EQ(s.server.version(), 2);
  s.Send(Push(0, 0, kAll));
  return s.Weights();
}

TEST(UpdateMethodsTest, StalenessAwareRateDividesByTheStaleness) {
  ShardConfig c = PlainSgd(ConsistencyMode::kAsp, 2);
  for (bool aware : {false, true}) {
    c.methods.staleness_lr = aware;
    const std::vector<float> got = StaleAsp(c);
    for (int i = 0; i < kValues; ++i) {
      double x = kInitial[i];
      for (int t = 0; t < 4; ++t) x -= 0.1 * 0.5 * Grad(1, t, i);  // staleness 0
      x -= 0.1 * 0.5 * (aware ? 0.5 : 1.0) * Grad(0, 0, i);
      EXPECT_NEAR(got[i], x, 1e-5) << i << (aware ? " aware" : " plain");
    }
  }
}

TEST(UpdateMethodsTest, DcAsgdCompensatesWithTheWeightsThePusherWasServed) {
  for (bool adaptive : {false, true}) {
    ShardConfig c = PlainSgd(ConsistencyMode::kAsp, 2);
    c.methods.dc_lambda = adaptive ? 2.f : 0.5f;
    c.methods.dc_adaptive = adaptive;
    c.methods.dc_momentum = 0.9f;
    c.methods.dc_epsilon = 1e-3f;
    const std::vector<float> got = StaleAsp(c);
    for (int i = 0; i < kValues; ++i) {
      double x = kInitial[i], ms = 0;
      for (int t = 0; t < 4; ++t) {
        const double g = Grad(1, t, i);
        ms = 0.9 * ms + 0.1 * g * g;  // worker 1 is always fresh: no compensation
        x -= 0.1 * 0.5 * g;
      }
      const double g = Grad(0, 0, i);
      ms = 0.9 * ms + 0.1 * g * g;
      const double lambda = adaptive ? 2.0 / (std::sqrt(ms) + 1e-3) : 0.5;
      x -= 0.1 * 0.5 * (g + lambda * g * g * (x - kInitial[i]));
      EXPECT_NEAR(got[i], x, 2e-5 * std::max(1.0, std::abs(x))) << i << " adaptive " << adaptive;
    }
  }
}

}  // namespace
}  // namespace pstrain::server

namespace pstrain::server {
namespace {

using namespace test_support;  // NOLINT: the suite's scripted messages

TEST(UpdateMethodsTest, ElasticPushesAreAddedToTheWeightsWithoutTheSolver) {
  // bsp: the W deltas of a step summed in rank order and added, no lr, no momentum.
  ShardConfig c = Config(ConsistencyMode::kBsp, 2);
  c.methods.elastic = true;
  Shard s(c);
  s.Send(Init(0, 1));
  s.Send(Push(1, 0, {0, 1, 2}));
  EXPECT_EQ(s.Weights()[0], kInitial[0]);  // waits for worker 0
  s.Send(Push(0, 0, {0, 1, 2}));
  EXPECT_EQ(s.server.version(), 1);
  for (int i = 0; i < kValues; ++i) {
    EXPECT_FLOAT_EQ(s.Weights()[i], kInitial[i] + Grad(0, 0, i) + Grad(1, 0, i)) << i;
  }
  // asp: each delta as it arrives.
  c.mode = ConsistencyMode::kAsp;
  Shard a(c);
  a.Send(Init(0, 1));
  a.Send(Push(1, 0, {0}));
  EXPECT_FLOAT_EQ(a.Weights()[0], kInitial[0] + Grad(1, 0, 0));
  EXPECT_EQ(a.Weights()[4], kInitial[4]);
  UpdateMethods m;
  m.elastic = true;
  m.dc_lambda = 0.1f;
  EXPECT_FALSE(ValidateUpdateMethods(m, ConsistencyMode::kAsp, 2).ok());
}

}  // namespace
}  // namespace pstrain::server

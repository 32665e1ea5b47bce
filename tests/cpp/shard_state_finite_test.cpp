// A PUSH or INIT_PUSH holding NaN or infinity never reaches the weights:
// refused whole, counted and named, and under kStop the shard fails. DropLog
// bounds the lines such refusals write.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/drop_log.hpp"
#include "tests/cpp/shard_state_test_util.hpp"

namespace pstrain::server {
namespace {

using namespace test_support;  // NOLINT: the suite's vocabulary

std::vector<float> Poisoned(std::vector<float> values, size_t at, float bad) {
  values[at] = bad;
  return values;
}

TEST(ShardStateFinite, DropRefusesTheWholePushAndGoesOn) {
  ShardConfig config = Config(ConsistencyMode::kAsp, 2);
  config.nonfinite = NonFinitePolicy::kDrop;
  Shard shard(config);
  shard.Send(Hello(0, 2));
  shard.Send(Hello(1, 2));
  shard.Send(Init(0, 1));
  const std::vector<float> before = shard.Weights();
  // Chunk 0 is fine, chunk 2 holds a NaN: nothing of the push is applied.
  Message poisoned(pstrain::PUSH, 1, 0);
  poisoned.Chunk(0, {0.5f, 0.5f, 0.5f, 0.5f});
  poisoned.Chunk(2, Poisoned({1.f, 1.f}, 1, std::numeric_limits<float>::quiet_NaN()));
  auto out = shard.Send(std::move(poisoned));
  ASSERT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(Find(out, pstrain::ERROR)->header.text(),
            "PUSH from worker 1 for iteration 0: chunk 2 (parameter 1 'b', value 1) holds nan: "
            "refused");
  EXPECT_EQ(shard.Weights(), before);
  EXPECT_TRUE(shard.server.failure().ok());
  pstrain::ShardStats stats = shard.server.Stats();
  EXPECT_EQ(stats.nonfinite_rejected(), 1);
  EXPECT_EQ(stats.pushes_applied(), 0);
  EXPECT_EQ(stats.nonfinite_last(),
            "PUSH from worker 1 for iteration 0: chunk 2 (parameter 1 'b', value 1) holds nan");
  ASSERT_FALSE(shard.logs.empty());
  EXPECT_NE(shard.logs.back().find("refused, nothing applied (security.nonfinite: drop)"),
            std::string::npos);
  // The same worker's finite push of that iteration is still taken.
  out = shard.Send(Push(1, 0, {0, 1, 2}));
  EXPECT_EQ(Count(out, pstrain::PUSH_ACK), 1);
  EXPECT_NE(shard.Weights(), before);
}

TEST(ShardStateFinite, StopFailsTheShardAndKeepsTheWeights) {
  ShardConfig config = Config(ConsistencyMode::kBsp, 1);
  config.nonfinite = NonFinitePolicy::kStop;
  Shard shard(config);
  shard.Send(Hello(0, 1));
  // An initial weight that is infinite is refused too: the shard stays empty.
  Message bad_init(pstrain::INIT_PUSH, 0, 0);
  for (const auto& p : Params()) *bad_init.header().add_params() = p;
  bad_init.Chunk(0, {1, 2, 3, std::numeric_limits<float>::infinity()});
  bad_init.Chunk(1, {5, 6});
  bad_init.Chunk(2, {0.5f, -0.5f});
  auto out = shard.Send(std::move(bad_init));
  EXPECT_EQ(Count(out, pstrain::INIT_ACK), 0);
  EXPECT_FALSE(shard.server.initialized());
  ASSERT_FALSE(shard.server.failure().ok());
  EXPECT_EQ(shard.server.failure().code(), StatusCode::kDiverged);
  EXPECT_EQ(shard.server.failure().message(),
            "INIT_PUSH from worker 0 for iteration 0: chunk 0 (value 3) holds inf; the job stops "
            "(security.nonfinite: stop)");
}

TEST(DropLog, FirstLinesInFullThenOneCountLinePerInterval) {
  std::vector<std::string> lines;
  DropLog log([&](const std::string& l) { lines.push_back(l); }, 3, std::chrono::seconds(10));
  const DropLog::Clock::time_point t0{};
  for (int i = 0; i < 1000; ++i) log.Report("drop " + std::to_string(i), t0);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2], "drop 2");
  EXPECT_EQ(lines[3], "further drops are counted, one line every 10 s");
  log.Report("drop late", t0 + std::chrono::seconds(11));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[4],
            "998 more dropped or refused in the last 11.0 s (1001 in all); the latest: "
            "drop late");
  log.Count(5, t0 + std::chrono::seconds(12));
  EXPECT_EQ(lines.size(), 5u);
  log.Flush(t0 + std::chrono::seconds(13), /*force=*/true);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[5], "5 more dropped or refused in the last 2.0 s (1006 in all)");
  EXPECT_EQ(log.total(), 1006);
}

}  // namespace
}  // namespace pstrain::server

// Pulls beside pushes (docs/wire-protocol.md, "Pulls beside pushes"): a
// worker's pull request travels on a connection of its own, so it can reach
// the shard while the worker's last push is still arriving; the shard then
// answers chunk by chunk as that push is applied. The shard by hand (a pull
// that waits for its own push sees every chunk only after it, ssp's bound
// still holds, bad after_push values are refused), and real PsClients against
// a real ShardLoop over tcp and ipc in bsp (1 and 2 workers), ssp and asp
// (1 and 2 workers): a pull sent right behind an unacknowledged push gives
// exactly the weights the update rule gives after that push, in blobs whose
// sizes are no multiple of the chunk or part size. Every wait is bounded.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <tuple>

#include "common/optim/lr_policy.hpp"
#include "common/optim/update_rule.hpp"
#include "common/transport/validate.hpp"
#include "server/shard_loop.hpp"
#include "tests/cpp/shard_state_test_util.hpp"
#include "worker/ps/ps_client.hpp"

namespace pstrain {
namespace {

using namespace std::chrono_literals;
using namespace server::test_support;  // NOLINT

server::test_support::Message PullAfter(int w, int64_t t, int64_t after_push) {
  server::test_support::Message m = Pull(w, t);
  m.header().set_after_push(after_push);
  m.Peer("w" + std::to_string(w) + "-pull");
  return m;
}

std::vector<uint32_t> ReplyChunks(const std::vector<server::Outgoing>& out) {
  std::vector<uint32_t> ids;
  for (const auto& o : out) {
    if (o.header.type() != pstrain::PULL_REPLY) continue;
    EXPECT_EQ(o.peer.substr(o.peer.size() - 5), "-pull");
    for (const auto& c : o.header.chunks()) ids.push_back(c.id());
  }
  return ids;
}

TEST(PullBesidePushTest, AnAspPullWaitsChunkByChunkForItsOwnPush) {
  Shard shard(Config(ConsistencyMode::kAsp, 1));
  Shard twin(Config(ConsistencyMode::kAsp, 1));  // the pull behind the push, as on one connection
  for (Shard* s : {&shard, &twin}) {
    (void)s->Send(Hello(0, 1));
    (void)s->Send(Init(0, 1));
    (void)s->Send(Push(0, 0, {0, 1, 2}));
  }
  // Clock 1: the pull for iteration 2 arrives before any part of push 1.
  EXPECT_TRUE(ReplyChunks(shard.Send(PullAfter(0, 2, 1))).empty());
  auto out = shard.Send(Push(0, 1, {1}));
  ASSERT_EQ(Count(out, pstrain::PUSH_ACK), 1);
  EXPECT_EQ(ReplyChunks(out), (std::vector<uint32_t>{1}));
  const server::Outgoing* part = Find(out, pstrain::PULL_REPLY);
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(part->header.clock(), 2);
  EXPECT_EQ(part->header.reply_chunks_total(), 3u);
  std::vector<float> first(part->payloads[0]->begin(), part->payloads[0]->end());
  out = shard.Send(Push(0, 1, {2, 0}));
  EXPECT_EQ(ReplyChunks(out), (std::vector<uint32_t>{0, 2}));
  const server::Outgoing* rest = Find(out, pstrain::PULL_REPLY);
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(rest->header.version(), 2);  // the whole push is in: version 2
  (void)twin.Send(Push(0, 1, {0, 1, 2}));
  auto whole = twin.Send(Pull(0, 2));
  const server::Outgoing* expected = Find(whole, pstrain::PULL_REPLY);
  ASSERT_NE(expected, nullptr);
  ASSERT_EQ(expected->header.chunks_size(), 3);
  // Every chunk as the pull behind the whole push would have seen it.
  EXPECT_EQ(first, *expected->payloads[1]);
  EXPECT_EQ(*rest->payloads[0], *expected->payloads[0]);
  EXPECT_EQ(*rest->payloads[1], *expected->payloads[2]);
  // Without after_push an asp pull is still answered at once.
  EXPECT_EQ(ReplyChunks(shard.Send(Pull(0, 2).Peer("w0-pull"))).size(), 3u);
}

TEST(PullBesidePushTest, AnSspPullStillWaitsForTheSlowestWorker) {
  Shard shard(Config(ConsistencyMode::kSsp, 2, /*staleness=*/0));
  (void)shard.Send(Hello(0, 2));
  (void)shard.Send(Hello(1, 2));
  (void)shard.Send(Init(0, 1));
  EXPECT_TRUE(ReplyChunks(shard.Send(PullAfter(0, 1, 0))).empty());
  // Its own push is in, but worker 1 is at clock 0 < 1 - staleness: nothing.
  EXPECT_TRUE(ReplyChunks(shard.Send(Push(0, 0, {0, 1, 2}))).empty());
  EXPECT_TRUE(ReplyChunks(shard.Send(Push(1, 0, {0, 2}))).empty());
  EXPECT_EQ(ReplyChunks(shard.Send(Push(1, 0, {1}))).size(), 3u);
}

TEST(PullBesidePushTest, BadAfterPushValuesAreRefused) {
  Shard shard(Config(ConsistencyMode::kAsp, 1));
  (void)shard.Send(Hello(0, 1));
  (void)shard.Send(Init(0, 1));
  for (auto [after, why] : {std::tuple<int64_t, const char*>{3, "waits for push 3"},
                            {4, "waits for push 4"},
                            {-1, "waits for push -1"}}) {
    server::test_support::Message m = PullAfter(0, 3, after);
    const server::Incoming& in = m.get();
    transport::InMessage wire;
    wire.header = in.header;
    const Status s = transport::Validate(wire, shard.server.RulesFor(in.header));
    ASSERT_FALSE(s.ok()) << after;
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  }
  server::test_support::Message push(pstrain::PUSH, 0, 1);
  push.header().set_after_push(0);
  transport::InMessage wire;
  wire.header = push.get().header;
  const Status s = transport::Validate(wire, shard.server.RulesFor(wire.header));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("after_push in a PUSH"), std::string::npos) << s.message();
}

// Two parameters of 300,001 and 199,999 floats in chunks of 64 Ki floats:
// 9 chunks, neither size a multiple of the chunk or the 1 MiB part.
constexpr int64_t kChunkBytes = 256 * 1024;
const std::vector<int> kSizes = {300001, 199999};

float Initial(int p, int i) { return static_cast<float>((i * 7 + p * 3) % 101) * 0.01f - 0.5f; }
float Gradient(int w, int step, int p, int i) {
  return static_cast<float>((i * 13 + p * 5 + step * 11 + w * 29) % 97) * 0.001f - 0.04f;
}

struct Case {
  std::string transport;
  ConsistencyMode mode;
  int workers;
};

class PsPullBesidePushTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/ps-beside-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    clients_.clear();
    if (thread_.joinable()) {
      service_->Stop();
      thread_.join();
    }
    std::filesystem::remove_all(dir_);
  }

  transport::Context context_;
  std::string dir_;
  std::unique_ptr<server::ShardLoop> service_;
  std::thread thread_;
  std::vector<std::unique_ptr<PsClient>> clients_;
};

TEST_P(PsPullBesidePushTest, APullRightBehindItsPushGetsThePostUpdateWeights) {
  const Case c = GetParam();
  const int W = c.workers;
  server::ShardConfig config = Config(c.mode, W, /*staleness=*/1);
  config.chunk_bytes = kChunkBytes;
  config.job_key = 43;
  const optim::SolverHyper hyper = config.hyper;
  server::ShardLoopOptions options;
  options.bind = c.transport == "tcp" ? "tcp://127.0.0.1:0" : "ipc://" + dir_ + "/shard";
  auto created =
      server::ShardLoop::Create(context_, server::ShardState(std::move(config)), options);
  ASSERT_TRUE(created.ok()) << created.status().message();
  service_ = std::move(created).value();
  thread_ = std::thread([this] { (void)service_->Run(); });

  // blobs[w][p]; expected and history: the rule on whole parameters.
  std::vector<std::vector<Blob>> blobs(static_cast<size_t>(W));
  for (auto& b : blobs) b = std::vector<Blob>(kSizes.size());
  std::vector<std::vector<float>> expected(kSizes.size()), history(kSizes.size());
  for (size_t p = 0; p < kSizes.size(); ++p) {
    for (int i = 0; i < kSizes[p]; ++i) expected[p].push_back(Initial(int(p), i));
    history[p].assign(static_cast<size_t>(kSizes[p]), 0.f);
  }
  for (int w = 0; w < W; ++w) {
    std::vector<PsParam> params;
    for (size_t p = 0; p < kSizes.size(); ++p) {
      Blob& b = blobs[size_t(w)][p];
      b.Reshape({kSizes[p]});
      std::copy(expected[p].begin(), expected[p].end(), b.mutable_cpu_data());
      params.push_back({"p" + std::to_string(p), &b});
    }
    PsClientOptions o;
    o.servers = {service_->endpoint()};
    o.rank = w;
    o.world_size = W;
    o.mode = c.mode;
    o.chunk_bytes = kChunkBytes;
    o.job_key = 43;
    o.timeout = 10s;
    auto connected = PsClient::Connect(context_, o, params);
    ASSERT_TRUE(connected.ok()) << connected.status().message();
    clients_.push_back(std::move(connected).value());
    int64_t clock = -1;
    ASSERT_TRUE(clients_.back()->Hello(&clock).ok());
  }
  ASSERT_TRUE(clients_[0]->InitPush().ok());
  for (int w = 0; w < W; ++w) {
    ASSERT_TRUE(clients_[size_t(w)]->Pull(0).ok());
    int64_t version = -1;
    ASSERT_TRUE(clients_[size_t(w)]->WaitPull(&version, nullptr).ok());
  }

  auto rule = optim::MakeUpdateRule(hyper).value();
  auto apply = [&](size_t p, std::vector<float> diff, float scale, int iter) {
    float* h = history[p].data();
    rule->Apply({optim::LearningRate(hyper, iter), iter, scale}, {1.f, 1.f},
                optim::ParamSlice{expected[p].data(), diff.data(), std::span<float* const>(&h, 1),
                                  expected[p].size()});
  };
  const bool bsp = c.mode == ConsistencyMode::kBsp;
  const std::vector<int> both = {0, 1};
  for (int step = 0; step < 3; ++step) {
    // ssp/asp with two workers: worker 1's push is acknowledged first, so
    // worker 0's pull has one right answer (both pushes, 1's first).
    const std::vector<int> order = W == 1 ? std::vector<int>{0} : std::vector<int>{1, 0};
    for (int w : order) {
      for (size_t p = 0; p < kSizes.size(); ++p) {
        float* d = blobs[size_t(w)][p].mutable_cpu_diff();
        for (int i = 0; i < kSizes[p]; ++i) d[i] = Gradient(w, step, int(p), i);
      }
      ASSERT_TRUE(clients_[size_t(w)]->Push(both, step, -1).ok());
      if (!bsp && w == 1) {
        ASSERT_TRUE(clients_[1]->Flush().ok());
      }
    }
    for (size_t p = 0; p < kSizes.size(); ++p) {
      if (bsp) {  // rank order sum, scaled 1/W: one step
        std::vector<float> sum(static_cast<size_t>(kSizes[p]), 0.f);
        for (int w = 0; w < W; ++w) {
          for (int i = 0; i < kSizes[p]; ++i) {
            const float g = Gradient(w, step, int(p), i);
            sum[size_t(i)] = w == 0 ? g : sum[size_t(i)] + g;
          }
        }
        apply(p, sum, 1.f / static_cast<float>(W), step);
      } else {  // each push on arrival, scaled 1/W
        for (int w : order) {
          std::vector<float> g;
          for (int i = 0; i < kSizes[p]; ++i) g.push_back(Gradient(w, step, int(p), i));
          apply(p, g, 1.f / static_cast<float>(W), 0);
        }
      }
    }
    // Right behind the (unacknowledged) push: the pull for the next iteration.
    const std::vector<int> pullers = bsp ? std::vector<int>(both.begin(), both.begin() + W)
                                         : std::vector<int>{0};
    for (int w : pullers) {
      for (auto& b : blobs[size_t(w)]) std::fill_n(b.mutable_cpu_data(), b.count(), 0.f);
      ASSERT_TRUE(clients_[size_t(w)]->Pull(step + 1).ok());
    }
    for (int w : pullers) {
      int64_t version = -1;
      ASSERT_TRUE(clients_[size_t(w)]->WaitPull(&version, nullptr).ok());
      EXPECT_EQ(version, step + 1);
      for (size_t p = 0; p < kSizes.size(); ++p) {
        ASSERT_EQ(std::memcmp(blobs[size_t(w)][p].cpu_data(), expected[p].data(),
                              expected[p].size() * 4),
                  0)
            << "worker " << w << " param " << p << " after step " << step;
      }
    }
  }
  for (auto& client : clients_) ASSERT_TRUE(client->Flush().ok());
  auto stats = clients_[0]->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ((*stats)[0].bad_messages(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    ModesAndTransports, PsPullBesidePushTest,
    ::testing::Values(Case{"tcp", ConsistencyMode::kBsp, 1}, Case{"tcp", ConsistencyMode::kBsp, 2},
                      Case{"tcp", ConsistencyMode::kSsp, 1}, Case{"tcp", ConsistencyMode::kAsp, 1},
                      Case{"tcp", ConsistencyMode::kAsp, 2}, Case{"ipc", ConsistencyMode::kAsp, 1},
                      Case{"ipc", ConsistencyMode::kBsp, 2}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return info.param.transport + "_" + ModeName(info.param.mode) + "_W" +
             std::to_string(info.param.workers);
    });

}  // namespace
}  // namespace pstrain

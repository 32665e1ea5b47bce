// Pushes and pull replies larger than kMessagePartBytes travel as several
// messages: PartStarts' cuts; a real PsClient against a real ShardLoop
// (tcp on 127.0.0.1 and inproc) whose blobs end up with exactly the floats
// the update rule gives on whole parameters; a push applied chunk by chunk
// (one message per chunk) and as one message giving the same weights; and
// the copy-on-write snapshots of ChunkStore. Every wait is bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <thread>
#include <tuple>

#include "common/optim/lr_policy.hpp"
#include "common/optim/update_rule.hpp"
#include "common/transport/protocol.hpp"
#include "common/transport/gradient_codec.hpp"
#include "server/apply_threads.hpp"
#include "server/chunk_store.hpp"
#include "server/encoded_gradient.hpp"
#include "server/shard_loop.hpp"
#include "tests/cpp/shard_state_test_util.hpp"
#include "worker/ps/ps_client.hpp"

namespace pstrain {
namespace {

using namespace std::chrono_literals;
using transport::PartStarts;

TEST(PartStartsTest, CutsRunsOfAtMostPartBytes) {
  EXPECT_TRUE(PartStarts({}, 100).empty());
  EXPECT_EQ(PartStarts({40, 40, 40, 40}, 100), (std::vector<size_t>{0, 2}));
  EXPECT_EQ(PartStarts({100, 100, 1}, 100), (std::vector<size_t>{0, 1, 2}));
  // A chunk larger than a part is a part of its own.
  EXPECT_EQ(PartStarts({10, 250, 10, 10}, 100), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(PartStarts({60, 50, 50, 60}, 100), (std::vector<size_t>{0, 1, 3}));
}

// The one splitter of PUSH (PsClient) and PULL_REPLY (ShardLoop): runs of
// consecutive chunks, each part with the header's other fields, payloads in order.
TEST(PartStartsTest, SplitMessageCutsChunksAndPayloadsTogether) {
  transport::OutMessage m{transport::PushHeader({WORKER, 1, 7}, 5, 2.5), {}};
  std::vector<std::shared_ptr<const std::vector<float>>> buffers;
  for (uint32_t id = 0; id < 4; ++id) {
    transport::AddChunk(m.header, id, 10);
    buffers.push_back(std::make_shared<const std::vector<float>>(10, static_cast<float>(id)));
    m.payloads.push_back(transport::Payload::Of(buffers.back()));
  }
  const std::vector<transport::OutMessage> parts = transport::SplitMessage(m, 100);  // 40 B each
  ASSERT_EQ(parts.size(), 2u);
  for (size_t k = 0; k < parts.size(); ++k) {
    EXPECT_EQ(parts[k].header.type(), PUSH);
    EXPECT_EQ(parts[k].header.clock(), 5);
    EXPECT_EQ(parts[k].header.sum_squares(), 2.5);
    ASSERT_EQ(parts[k].header.chunks_size(), 2);
    ASSERT_EQ(parts[k].payloads.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      const uint32_t id = static_cast<uint32_t>(2 * k + static_cast<size_t>(i));
      EXPECT_EQ(parts[k].header.chunks(i).id(), id);
      EXPECT_EQ(parts[k].payloads[static_cast<size_t>(i)].bytes(), 40u);
      EXPECT_EQ(parts[k].payloads[static_cast<size_t>(i)].data[0], static_cast<float>(id));
    }
  }
  const std::vector<transport::OutMessage> whole = transport::SplitMessage(m, 160);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].header.chunks_size(), 4);
}

TEST(PartStartsTest, NormHeaderCarriesClockAndSumOfSquares) {
  const Header h = transport::NormHeader({SERVER, 2, 9}, NORM_PARTIAL, 12, 0.75);
  EXPECT_EQ(h.type(), NORM_PARTIAL);
  EXPECT_EQ(h.role(), SERVER);
  EXPECT_EQ(h.sender(), 2);
  EXPECT_EQ(h.clock(), 12);
  EXPECT_EQ(h.sum_squares(), 0.75);
  EXPECT_TRUE(transport::CheckKind(h, SERVER).ok());
}

// Two parameters of 300,000 and 200,000 floats in chunks of 64 Ki floats
// (256 KiB): 9 chunks, 2 MB, so every push and every reply goes in parts.
constexpr int64_t kChunkBytes = 256 * 1024;
const std::vector<int> kSizes = {300000, 200000};

float Initial(int p, int i) { return static_cast<float>((i * 7 + p * 3) % 101) * 0.01f - 0.5f; }
float Gradient(int step, int p, int i) {
  return static_cast<float>((i * 13 + p * 5 + step * 11) % 97) * 0.001f - 0.04f;
}

class PsPartsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void TearDown() override {
    if (thread_.joinable()) {
      service_->Stop();
      thread_.join();
    }
  }

  server::ShardConfig MakeConfig() {
    server::ShardConfig config = server::test_support::Config(ConsistencyMode::kAsp, 1);
    config.chunk_bytes = kChunkBytes;
    config.job_key = 41;  // STATS needs one (or CURVE)
    return config;
  }

  transport::Context context_;
  std::unique_ptr<server::ShardLoop> service_;
  std::thread thread_;
};

TEST_P(PsPartsTest, ABigExchangeGivesTheRulesFloatsInTheBlobs) {
  server::ShardConfig config = MakeConfig();
  const optim::SolverHyper hyper = config.hyper;
  server::ShardLoopOptions options;
  options.bind = GetParam() == "tcp" ? "tcp://127.0.0.1:0" : "inproc://ps-parts";
  auto created =
      server::ShardLoop::Create(context_, server::ShardState(std::move(config)), options);
  ASSERT_TRUE(created.ok()) << created.status().message();
  service_ = std::move(created).value();
  thread_ = std::thread([this] { (void)service_->Run(); });

  std::vector<Blob> blobs(kSizes.size());
  std::vector<PsParam> params;
  std::vector<std::vector<float>> expected(kSizes.size()), history(kSizes.size());
  for (size_t p = 0; p < kSizes.size(); ++p) {
    blobs[p].Reshape({kSizes[p]});
    for (int i = 0; i < kSizes[p]; ++i) blobs[p].mutable_cpu_data()[i] = Initial(int(p), i);
    expected[p].assign(blobs[p].cpu_data(), blobs[p].cpu_data() + kSizes[p]);
    history[p].assign(static_cast<size_t>(kSizes[p]), 0.f);
    params.push_back({"p" + std::to_string(p), &blobs[p]});
  }
  PsClientOptions o;
  o.servers = {service_->endpoint()};
  o.mode = ConsistencyMode::kAsp;
  o.chunk_bytes = kChunkBytes;
  o.job_key = 41;
  o.timeout = 10s;
  o.max_pushes_in_flight = 2;  // the window is per message: parts wait for acks
  auto connected = PsClient::Connect(context_, o, params);
  ASSERT_TRUE(connected.ok()) << connected.status().message();
  std::unique_ptr<PsClient> client = std::move(connected).value();
  EXPECT_EQ(client->placement().chunks().size(), 9u);
  int64_t clock = -1;
  ASSERT_TRUE(client->Hello(&clock).ok());
  ASSERT_TRUE(client->InitPush().ok());

  auto rule = optim::MakeUpdateRule(hyper).value();
  for (int step = 0; step < 3; ++step) {
    for (auto& b : blobs) std::fill_n(b.mutable_cpu_data(), b.count(), 0.f);  // the pull refills
    ASSERT_TRUE(client->Pull(step).ok());
    int64_t version = -1;
    ASSERT_TRUE(client->WaitPull(&version, nullptr).ok());
    EXPECT_EQ(version, step);
    for (size_t p = 0; p < kSizes.size(); ++p) {
      ASSERT_EQ(std::memcmp(blobs[p].cpu_data(), expected[p].data(), expected[p].size() * 4), 0)
          << "param " << p << " after step " << step;
    }
    for (size_t p = 0; p < kSizes.size(); ++p) {
      for (int i = 0; i < kSizes[p]; ++i)
        blobs[p].mutable_cpu_diff()[i] = Gradient(step, int(p), i);
      // The rule on the whole parameter, as a single process would apply it.
      std::vector<float> diff(blobs[p].cpu_diff(), blobs[p].cpu_diff() + kSizes[p]);
      float* h = history[p].data();
      rule->Apply({optim::LearningRate(hyper, step), step, 1.f}, {1.f, 1.f},
                  optim::ParamSlice{expected[p].data(), diff.data(), std::span<float* const>(&h, 1),
                                    expected[p].size()});
    }
    ASSERT_TRUE(client->Push({1}, step, -1).ok());
    ASSERT_TRUE(client->Push({0}, step, -1).ok());
    ASSERT_TRUE(client->Flush().ok());
    // The gradients went out (tcp: from the diffs themselves; inproc: staged,
    // the shard clobbers its copy): the diffs are the caller's again.
    for (size_t p = 0; p < kSizes.size(); ++p) {
      EXPECT_EQ(blobs[p].cpu_diff()[kSizes[p] - 1], Gradient(step, int(p), kSizes[p] - 1));
      std::fill_n(blobs[p].mutable_cpu_diff(), blobs[p].count(), 1e6f);
    }
  }
  ASSERT_TRUE(client->Pull(3).ok());
  int64_t version = -1;
  ASSERT_TRUE(client->WaitPull(&version, nullptr).ok());
  for (size_t p = 0; p < kSizes.size(); ++p) {
    ASSERT_EQ(std::memcmp(blobs[p].cpu_data(), expected[p].data(), expected[p].size() * 4), 0);
  }
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ((*stats)[0].pushes_applied(), 3);
  EXPECT_EQ((*stats)[0].bad_messages(), 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, PsPartsTest, ::testing::Values("tcp", "inproc"));

// One push of three chunks against three pushes of one chunk: the same floats.
TEST(ShardStatePartsTest, AChunkWisePushGivesTheWholeMessagesWeights) {
  using namespace server::test_support;  // NOLINT
  for (ConsistencyMode mode : {ConsistencyMode::kBsp, ConsistencyMode::kAsp}) {
    server::ShardState whole(Config(mode, 1)), parts(Config(mode, 1));
    for (server::ShardState* s : {&whole, &parts}) {
      (void)s->Handle(Hello(0, 1).get(), kT0);
      (void)s->Handle(Init(0, 1).get(), kT0);
    }
    for (int64_t t = 0; t < 3; ++t) {
      (void)whole.Handle(Push(0, t, {0, 1, 2}).get(), kT0);
      for (uint32_t id : {2u, 0u, 1u}) (void)parts.Handle(Push(0, t, {id}).get(), kT0);
      ASSERT_EQ(whole.version(), t + 1);
      ASSERT_EQ(parts.version(), t + 1);
    }
    for (uint32_t id : {0u, 1u, 2u}) {
      const auto a = whole.store()->weights(id);
      const auto b = parts.store()->weights(id);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "chunk " << id;
    }
    // bsp with one worker applies on the received frame: the hand-computed step.
    if (mode == ConsistencyMode::kBsp) {
      const std::vector<double> hand = HandBsp(1, 3);
      for (int i = 0; i < 4; ++i)
        EXPECT_FLOAT_EQ(whole.store()->weights(0)[size_t(i)], static_cast<float>(hand[size_t(i)]));
    }
  }
}

// The shard's scan for NaN and infinity runs block-wise (vectorised); it
// still names the first bad value, in any block, and refuses the whole push.
TEST(ShardStatePartsTest, TheNonFiniteScanNamesTheFirstBadValueOfALargeChunk) {
  using namespace server::test_support;  // NOLINT
  server::ShardConfig config = Config(ConsistencyMode::kAsp, 1);
  config.chunk_bytes = 40000;  // one chunk of 10,000 values
  config.nonfinite = server::NonFinitePolicy::kDrop;
  server::ShardState shard(std::move(config));
  pstrain::ParamMeta big;
  big.set_name("big");
  big.add_shape(10000);
  Message init(pstrain::INIT_PUSH, 0, 0);
  *init.header().add_params() = big;
  init.Chunk(0, std::vector<float>(10000, 1.f));
  (void)shard.Handle(Hello(0, 1).get(), kT0);
  (void)shard.Handle(init.get(), kT0);
  const float kInf = std::numeric_limits<float>::infinity();
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  for (auto [at, bad, text] : {std::tuple<int, float, const char*>{9999, -kInf, "-inf"},
                               {5000, kNaN, "nan"},
                               {4095, kInf, "inf"},
                               {0, kNaN, "nan"}}) {
    std::vector<float> grad(10000, 0.5f);
    grad[static_cast<size_t>(at)] = bad;
    if (at == 5000) grad[9000] = kInf;  // only the first is named
    Message push(pstrain::PUSH, 0, 0);
    push.Chunk(0, grad);
    auto out = shard.Handle(push.get(), kT0);
    ASSERT_EQ(Count(out, pstrain::ERROR), 1);
    EXPECT_EQ(Find(out, pstrain::ERROR)->header.text(),
              "PUSH from worker 0 for iteration 0: chunk 0 (parameter 0 'big', value " +
                  std::to_string(at) + ") holds " + text + ": refused");
    EXPECT_EQ(shard.store()->weights(0)[0], 1.f);
  }
  Message fine(pstrain::PUSH, 0, 0);
  fine.Chunk(0, std::vector<float>(10000, std::numeric_limits<float>::max()));
  auto out = shard.Handle(fine.get(), kT0);
  EXPECT_EQ(Count(out, pstrain::PUSH_ACK), 1);
}

// The weights are served as they are; a change while a puller holds them
// moves them to another buffer (one copy), never writes under the puller.
TEST(ChunkStoreCopyOnWriteTest, UpdatesInPlaceUnlessASnapshotIsHeld) {
  optim::SolverHyper h;
  h.base_lr = 0.1f;
  auto placement = KeyPlacement::Create({2}, 1, 16).value();
  auto store = server::ChunkStore::Create(placement, 0, {{1, 1}}, h).value();
  store.SetWeights(0, std::vector<float>{3, 4});
  const float grad[] = {10, 10};
  const std::vector<float>* buffer = store.Snapshot(0).get();  // released at once
  store.ApplyGradient(0, grad, 1.f, 0);
  auto served = store.Snapshot(0);
  EXPECT_EQ(served.get(), buffer);  // updated in place: nobody held it
  EXPECT_EQ(*served, (std::vector<float>{2, 3}));
  EXPECT_EQ(store.copy_on_write_count(), 0);
  store.ApplyGradient(0, grad, 1.f, 0);  // `served` is held: copy, then update
  EXPECT_EQ(store.copy_on_write_count(), 1);
  EXPECT_EQ(*served, (std::vector<float>{2, 3}));
  EXPECT_EQ(store.weights(0)[0], 1.f);
  EXPECT_NE(store.Snapshot(0).get(), served.get());
  served.reset();
  store.SetWeights(0, std::vector<float>{7, 8});  // nobody holds the current one
  EXPECT_EQ(store.copy_on_write_count(), 1);
  EXPECT_EQ(*store.Snapshot(0), (std::vector<float>{7, 8}));
}

// The copy a held snapshot forces is made block by block just before each
// block's update, on the apply threads: the updated values are those of an
// update in place, bit for bit, for float32 and encoded gradients, and the
// holder's values never change.
TEST(ChunkStoreCopyOnWriteTest, HeldSnapshotsGiveTheInPlaceResultOverBlocksAndThreads) {
  const size_t n = 2 * server::ApplyThreads::kMinPerThread + 3 * server::kDecodeBlock + 5;
  optim::SolverHyper h;
  h.base_lr = 0.1f;
  h.momentum = 0.9f;
  h.weight_decay = 0.01f;
  auto placement =
      KeyPlacement::Create({static_cast<int64_t>(n)}, 1, static_cast<int64_t>(n * 4)).value();
  std::vector<float> start(n), grad(n);
  for (size_t i = 0; i < n; ++i) {
    start[i] = 0.001f * static_cast<float>(i % 977) - 0.3f;
    grad[i] = 0.01f * static_cast<float>((i * 7) % 131) - 0.6f;
  }
  std::vector<float> halves;
  (void)transport::EncodeHalves(pstrain::FLOAT16, grad.data(), n, &halves);
  const server::EncodedGradient encoded{pstrain::FLOAT16, halves.data(), halves.size() * 4, n};
  for (int threads : {1, 2}) {
    for (bool fp16 : {false, true}) {
      server::ApplyThreads pool(threads);
      std::vector<float> result[2];
      for (int held = 0; held < 2; ++held) {
        auto store = server::ChunkStore::Create(placement, 0, {{1, 1}}, h).value();
        store.set_threads(&pool);
        store.SetWeights(0, start);
        for (int step = 0; step < 2; ++step) {  // the second step reads the history
          auto kept = held ? store.Snapshot(0) : nullptr;
          const std::vector<float> before(store.weights(0).begin(), store.weights(0).end());
          std::vector<float> g = grad;
          if (fp16) {
            store.ApplyEncoded(0, encoded, 0.5f, step);
          } else {
            store.ApplyGradientInPlace(0, g.data(), 0.5f, step);
          }
          if (held) {
            EXPECT_EQ(*kept, before) << "step " << step;  // the holder's values
          }
        }
        EXPECT_EQ(store.copy_on_write_count(), held ? 2 : 0);
        result[held].assign(store.weights(0).begin(), store.weights(0).end());
      }
      EXPECT_EQ(std::memcmp(result[0].data(), result[1].data(), n * 4), 0)
          << threads << " threads, fp16 " << fp16;
      EXPECT_NE(result[0][n - 1], start[n - 1]);
    }
  }
}

}  // namespace
}  // namespace pstrain

// Pull overlap (transport.pull_overlap): the worker's per-layer wait
// (PsClient::WaitParams) against a fake shard that answers the first layer's
// chunks and holds the last layer's; the shard's reply order
// (server::PullReplyOrder: lowest chunk id first within a window of bytes
// ZeroMQ holds); and a real ShardLoop exchange through that order with a
// one-byte window, against hand-computed weights. Every wait is bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/transport/protocol.hpp"
#include "server/pull_reply_order.hpp"
#include "server/shard_loop.hpp"
#include "tests/cpp/shard_state_test_util.hpp"
#include "tests/cpp/transport_test_util.hpp"
#include "worker/ps/ps_client.hpp"

namespace pstrain {
namespace {

using namespace std::chrono_literals;
using namespace server::test_support;  // NOLINT: the shard suites' net and gradients
using server::Outgoing;
using server::PullReplyOrder;
using transport::OutMessage;
using transport::Payload;
using Clock = std::chrono::steady_clock;

// The test net's params: "w" {2, 3} (layer 0: chunks 0 and 1) and "b" {2}
// (the last layer: chunk 2), 16-byte chunks, one shard.
class WaitParamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    w_.Reshape({2, 3});
    b_.Reshape({2});
    std::fill_n(w_.mutable_cpu_data(), 6, 0.f);
    std::fill_n(b_.mutable_cpu_data(), 2, 0.f);
    auto router = transport::BindRouter(context_, "tcp://127.0.0.1:0");
    ASSERT_TRUE(router.ok()) << router.status().message();
    router_ = std::move(router).value();
  }

  std::unique_ptr<PsClient> Connect(std::chrono::milliseconds timeout) {
    PsClientOptions o;
    o.servers = {router_->endpoint()};
    o.chunk_bytes = 16;
    o.timeout = timeout;
    auto client = PsClient::Connect(context_, o, {{"w", &w_}, {"b", &b_}});
    EXPECT_TRUE(client.ok()) << client.status().message();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  transport::InMessage Next(pstrain::MessageType type) {
    while (true) {
      transport::InMessage m = testing::MustReceive(*router_);
      if (m.header.type() != pstrain::HEARTBEAT) {
        EXPECT_EQ(m.header.type(), type);
        return m;
      }
    }
  }

  // Acks HELLO (bsp, clock 0) and returns the PULL that follows.
  transport::InMessage AckHelloAndTakePull() {
    transport::InMessage hello = Next(pstrain::HELLO);
    EXPECT_TRUE(router_
                    ->Send(hello.peer,
                           OutMessage{transport::HelloAckHeader(kServer, hello.header, 0, 0,
                                                                ConsistencyMode::kBsp, 1),
                                      {}})
                    .ok());
    return Next(pstrain::PULL);
  }

  // A PULL_REPLY to `pull` with chunks `ids`, chunk id's values 10 * id + i.
  void Answer(const transport::InMessage& pull, const std::vector<uint32_t>& ids) {
    OutMessage reply{transport::ReplyHeader(kServer, pull.header, pstrain::PULL_REPLY), {}};
    reply.header.set_version(0);
    reply.header.set_reply_chunks_total(3);
    for (uint32_t id : ids) {
      auto values = std::make_shared<std::vector<float>>(static_cast<size_t>(Length(id)));
      for (size_t i = 0; i < values->size(); ++i) (*values)[i] = 10.f * id + i;
      transport::AddChunk(reply.header, id, values->size());
      reply.payloads.push_back(Payload::Of(values));
    }
    EXPECT_TRUE(router_->Send(pull.peer, std::move(reply)).ok());
  }

  const transport::Origin kServer{pstrain::SERVER, 0, 0};
  transport::Context context_;
  std::unique_ptr<transport::Channel> router_;
  Blob w_, b_;
};

// Layer 0's forward may start while the last layer's chunk is held: WaitParams
// for w returns with w's values in; for b it returns only once chunk 2 is sent.
TEST_F(WaitParamsTest, TheFirstLayerGoesOnWhileTheLastLayersChunkIsHeld) {
  auto client = Connect(5s);
  ASSERT_TRUE(client);
  std::atomic<bool> sent_last{false};
  std::atomic<bool> first_waited{false};
  std::thread shard([&] {
    transport::InMessage pull = AckHelloAndTakePull();
    Answer(pull, {0, 1});  // layer 0's chunks first
    // Hold chunk 2 until the client has finished waiting for layer 0.
    while (!first_waited.load()) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(300ms);
    sent_last.store(true);
    Answer(pull, {2});
  });
  int64_t clock = 0;
  ASSERT_TRUE(client->Hello(&clock).ok());
  ASSERT_TRUE(client->Pull(0).ok());
  ASSERT_TRUE(client->WaitParams({0}).ok());
  EXPECT_FALSE(sent_last.load());  // returned before the last chunk was sent
  first_waited.store(true);
  EXPECT_EQ(std::vector<float>(w_.cpu_data(), w_.cpu_data() + 6),
            (std::vector<float>{0, 1, 2, 3, 10, 11}));
  EXPECT_EQ(b_.cpu_data()[0], 0.f);  // not here yet
  const auto start = Clock::now();
  ASSERT_TRUE(client->WaitParams({1}).ok());
  EXPECT_TRUE(sent_last.load());
  EXPECT_GE(Clock::now() - start, 250ms);  // it blocked until chunk 2 came
  EXPECT_EQ(b_.cpu_data()[0], 20.f);
  EXPECT_EQ(b_.cpu_data()[1], 21.f);
  int64_t version = -1;
  EXPECT_TRUE(client->WaitPull(&version, nullptr).ok());  // completes the pull at once
  EXPECT_EQ(version, 0);
  EXPECT_GT(client->traffic().pull_wait_seconds, 0.25);
  shard.join();
}

// A shard that never sends the last layer's chunk: WaitParams for it is an
// error naming the shard after the timeout; for layer 0 it returned.
TEST_F(WaitParamsTest, AHeldChunkTimesOutNamingTheShard) {
  auto client = Connect(300ms);
  ASSERT_TRUE(client);
  EXPECT_EQ(client->WaitParams({0}).message(), "WaitParams without a Pull");
  std::thread shard([&] { Answer(AckHelloAndTakePull(), {0, 1}); });
  int64_t clock = 0;
  ASSERT_TRUE(client->Hello(&clock).ok());
  ASSERT_TRUE(client->Pull(0).ok());
  EXPECT_TRUE(client->WaitParams({0}).ok());
  const auto start = Clock::now();
  EXPECT_EQ(client->WaitParams({1}).message(),
            "no answer from server 0 (" + router_->endpoint() + ") for 0.3 s");
  EXPECT_LT(Clock::now() - start, 10s);
  shard.join();
}

// A PULL_REPLY to `peer` with chunks `ids`, each of `values` floats.
Outgoing Reply(const std::string& peer, const std::vector<uint32_t>& ids, size_t values = 4) {
  Outgoing o;
  o.peer = peer;
  o.header = transport::NewHeader({pstrain::SERVER, 0, 0}, pstrain::PULL_REPLY);
  o.header.set_clock(3);
  for (uint32_t id : ids) {
    transport::AddChunk(o.header, id, values);
    o.payloads.push_back(std::make_shared<std::vector<float>>(values, static_cast<float>(id)));
  }
  return o;
}

std::vector<uint32_t> Ids(const std::vector<std::pair<std::string, OutMessage>>& messages) {
  std::vector<uint32_t> ids;
  for (const auto& [peer, m] : messages) {
    for (const auto& c : m.header.chunks()) ids.push_back(c.id());
  }
  return ids;
}

// Several ready chunks go out lowest id (forward position) first, one window
// at a time: a chunk that becomes ready later but comes earlier in forward
// order overtakes the ones still queued; what ZeroMQ holds counts until it
// lets go (here: until the test drops the message).
TEST(PullReplyOrderTest, LowestChunkIdFirstWithinTheWindow) {
  PullReplyOrder order(/*window_bytes=*/8, /*part_bytes=*/16);  // one 4-float chunk a message
  order.Add(Reply("w0", {7, 5, 6}));
  auto first = order.Take();
  EXPECT_EQ(Ids(first), (std::vector<uint32_t>{5}));
  EXPECT_EQ(first[0].first, "w0");
  EXPECT_EQ(first[0].second.header.clock(), 3);  // the reply's fields on each part
  EXPECT_EQ(first[0].second.payloads[0].data[0], 5.f);
  EXPECT_EQ(order.in_flight("w0"), 16);
  order.Add(Reply("w0", {0}));                   // layer 0's chunk, ready later
  EXPECT_TRUE(order.Take().empty());             // the window is full
  first.clear();                                 // ZeroMQ let go of chunk 5
  EXPECT_EQ(order.in_flight("w0"), 0);
  auto second = order.Take();
  EXPECT_EQ(Ids(second), (std::vector<uint32_t>{0}));  // overtakes 6 and 7
  second.clear();
  EXPECT_EQ(Ids(order.Take()), (std::vector<uint32_t>{6}));  // dropped at once
  EXPECT_EQ(Ids(order.Take()), (std::vector<uint32_t>{7}));
  EXPECT_TRUE(order.empty());
}

// A wide window sends everything at once, consecutive chunks of one reply in
// one message up to part_bytes; peers have windows of their own; TakeAll
// (the shard exiting) ignores the window.
TEST(PullReplyOrderTest, PartsPeersAndTakeAll) {
  PullReplyOrder wide(/*window_bytes=*/1 << 20, /*part_bytes=*/32);
  wide.Add(Reply("w0", {4, 2, 3}));
  const auto all = wide.Take();
  ASSERT_EQ(all.size(), 2u);  // {2, 3} (32 bytes), then {4}
  EXPECT_EQ(all[0].second.header.chunks_size(), 2);
  EXPECT_EQ(Ids(all), (std::vector<uint32_t>{2, 3, 4}));

  PullReplyOrder narrow(/*window_bytes=*/1, /*part_bytes=*/16);
  narrow.Add(Reply("w0", {1, 2}));
  narrow.Add(Reply("w1", {3, 4}));
  const auto one_each = narrow.Take();
  EXPECT_EQ(Ids(one_each), (std::vector<uint32_t>{1, 3}));  // w0's and w1's first
  EXPECT_EQ(Ids(narrow.TakeAll()), (std::vector<uint32_t>{2, 4}));
  EXPECT_TRUE(narrow.empty());
}

// A reply without chunks (nothing left to send) goes as it is, at once.
TEST(PullReplyOrderTest, AReplyWithoutChunksIsNotHeld) {
  PullReplyOrder order(1, 16);
  order.Add(Reply("w0", {1}));
  auto held = order.Take();
  order.Add(Reply("w0", {}));
  const auto now = order.Take();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].second.header.chunks_size(), 0);
}

// The real shard loop with a one-byte window (each message waits until
// ZeroMQ let go of the one before): the exchange gives the hand-computed step.
TEST(PullOverlapShardTest, AnExchangeThroughAOneByteWindowGivesTheHandComputedStep) {
  transport::Context context;
  server::ShardLoopOptions options;
  options.bind = "tcp://127.0.0.1:0";
  options.pull_window_bytes = 1;
  server::ShardConfig config = Config(ConsistencyMode::kBsp, 1);
  config.job_key = 41;  // SHUTDOWN needs one
  auto created = server::ShardLoop::Create(context, server::ShardState(std::move(config)), options);
  ASSERT_TRUE(created.ok()) << created.status().message();
  std::unique_ptr<server::ShardLoop> service = std::move(created).value();
  std::thread loop([&] { (void)service->Run(); });
  Blob w, b;
  w.Reshape({2, 3});
  b.Reshape({2});
  std::copy(kInitial.begin(), kInitial.begin() + 6, w.mutable_cpu_data());
  std::copy(kInitial.begin() + 6, kInitial.end(), b.mutable_cpu_data());
  PsClientOptions o;
  o.servers = {service->endpoint()};
  o.chunk_bytes = 16;
  o.timeout = 5s;
  o.job_key = 41;
  auto connected = PsClient::Connect(context, o, {{"w", &w}, {"b", &b}});
  ASSERT_TRUE(connected.ok()) << connected.status().message();
  std::unique_ptr<PsClient> client = std::move(connected).value();
  int64_t clock = -1, version = -1;
  ASSERT_TRUE(client->Hello(&clock).ok());
  ASSERT_TRUE(client->InitPush().ok());
  for (int i = 0; i < 6; ++i) w.mutable_cpu_diff()[i] = Grad(0, 0, i);
  for (int i = 0; i < 2; ++i) b.mutable_cpu_diff()[i] = Grad(0, 0, 6 + i);
  ASSERT_TRUE(client->Pull(1).ok());  // bsp: before the pushes, answered chunk by chunk
  ASSERT_TRUE(client->Push({1}, 0, -1).ok());
  ASSERT_TRUE(client->Push({0}, 0, -1).ok());
  ASSERT_TRUE(client->WaitParams({0}).ok());
  ASSERT_TRUE(client->WaitPull(&version, nullptr).ok());
  EXPECT_EQ(version, 1);
  const std::vector<double> expected = HandBsp(1, 1);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(w.cpu_data()[i], expected[static_cast<size_t>(i)]);
  for (int i = 0; i < 2; ++i) EXPECT_FLOAT_EQ(b.cpu_data()[i], expected[static_cast<size_t>(6 + i)]);
  ASSERT_TRUE(client->Flush().ok());
  ASSERT_TRUE(client->Shutdown().ok());
  loop.join();
}

// Three chunks of 1 MiB (one message each) through a one-byte window: the
// loop sends the next part once ZeroMQ let go of the one before, with no
// other message to wake it; the worker gets every value.
TEST(PullOverlapShardTest, PartsHeldForTheWindowGoOutWithoutAnotherMessage) {
  constexpr int64_t kChunk = (1 << 20) / 4;
  transport::Context context;
  server::ShardLoopOptions options;
  options.bind = "tcp://127.0.0.1:0";
  options.pull_window_bytes = 1;
  server::ShardConfig config = Config(ConsistencyMode::kBsp, 1);
  config.chunk_bytes = 1 << 20;
  config.job_key = 42;
  auto created = server::ShardLoop::Create(context, server::ShardState(std::move(config)), options);
  ASSERT_TRUE(created.ok()) << created.status().message();
  std::unique_ptr<server::ShardLoop> service = std::move(created).value();
  std::thread loop([&] { (void)service->Run(); });
  Blob w;
  w.Reshape({3, static_cast<int>(kChunk)});
  for (int64_t i = 0; i < w.count(); ++i) w.mutable_cpu_data()[i] = static_cast<float>(i % 1000);
  PsClientOptions o;
  o.servers = {service->endpoint()};
  o.chunk_bytes = 1 << 20;
  o.timeout = 5s;
  o.heartbeat_interval = 0ms;  // nothing else reaches the shard while the client waits
  o.job_key = 42;
  auto connected = PsClient::Connect(context, o, {{"w", &w}});
  ASSERT_TRUE(connected.ok()) << connected.status().message();
  std::unique_ptr<PsClient> client = std::move(connected).value();
  int64_t clock = -1, version = -1;
  ASSERT_TRUE(client->Hello(&clock).ok());
  ASSERT_TRUE(client->InitPush().ok());
  std::fill_n(w.mutable_cpu_data(), w.count(), 0.f);
  ASSERT_TRUE(client->Pull(0).ok());
  const auto start = Clock::now();
  ASSERT_TRUE(client->WaitPull(&version, nullptr).ok());
  EXPECT_LT(Clock::now() - start, 2s);
  for (int64_t i = 0; i < w.count(); i += 4099) {
    ASSERT_EQ(w.cpu_data()[i], static_cast<float>(i % 1000)) << i;
  }
  ASSERT_TRUE(client->Shutdown().ok());
  loop.join();
}

}  // namespace
}  // namespace pstrain

// PsClient against a real ShardLoop (tcp on 127.0.0.1, Run on a thread):
// a whole exchange against hand-computed weights, heartbeats that keep a busy
// worker from being reported silent, a mode that differs from the servers',
// and, against a bare ROUTER playing a server, a silent server and a malformed
// reply, each an error naming the server's address. Every wait is bounded.
#include "worker/ps/ps_client.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "common/transport/fault.hpp"
#include "common/transport/protocol.hpp"
#include "server/shard_loop.hpp"
#include "tests/cpp/shard_state_test_util.hpp"
#include "tests/cpp/transport_test_util.hpp"

namespace pstrain {
namespace {

using namespace std::chrono_literals;
using namespace server::test_support;  // NOLINT: the shard suites' net and gradients
using server::ShardLoop;
using server::ShardLoopOptions;
using transport::OutMessage;
using transport::Payload;

class PsClientTest : public ::testing::Test {
 protected:
  // The test net's parameters: "w" {2, 3} and "b" {2}, at kInitial.
  void SetUp() override {
    w_.Reshape({2, 3});
    b_.Reshape({2});
    std::copy(kInitial.begin(), kInitial.begin() + 6, w_.mutable_cpu_data());
    std::copy(kInitial.begin() + 6, kInitial.end(), b_.mutable_cpu_data());
  }
  void TearDown() override {
    if (thread_.joinable()) {
      service_->Stop();
      thread_.join();
    }
  }

  void StartService(ConsistencyMode mode, ShardLoopOptions options = {}) {
    server::ShardConfig config = Config(mode, 1);
    config.job_key = job_key_;
    options.bind = "tcp://127.0.0.1:0";
    options.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex_);
      logs_.push_back(line);
    };
    auto created = ShardLoop::Create(context_, server::ShardState(std::move(config)), options);
    ASSERT_TRUE(created.ok()) << created.status().message();
    service_ = std::move(created).value();
    thread_ = std::thread([this] { (void)service_->Run(); });
  }

  PsClientOptions ClientOptions(const std::string& endpoint, ConsistencyMode mode) {
    PsClientOptions o;
    o.servers = {endpoint};
    o.mode = mode;
    o.chunk_bytes = 16;
    o.timeout = 5s;
    o.job_key = job_key_;
    return o;
  }

  std::unique_ptr<PsClient> MustConnect(const PsClientOptions& options) {
    auto client = PsClient::Connect(context_, options, {{"w", &w_}, {"b", &b_}});
    EXPECT_TRUE(client.ok()) << client.status().message();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  bool AnyLogContains(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& line : logs_) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }
  // True once a log line contains `text` (within 10 s: a loaded machine may
  // run the service's check late).
  bool LogAppears(const std::string& text) {
    return testing::Eventually([&] { return AnyLogContains(text); }, 10s);
  }

  Blob w_, b_;
  transport::Context context_;
  std::unique_ptr<ShardLoop> service_;
  std::thread thread_;
  std::mutex mutex_;  // guards logs_ (the service thread writes them)
  std::vector<std::string> logs_;
  // The job key of StartService's shard and ClientOptions. A shard without
  // one (and without CURVE) refuses STATS and SHUTDOWN.
  uint64_t job_key_ = 0;
};

TEST_F(PsClientTest, HelloInitPullPushGivesTheHandComputedStep) {
  job_key_ = 41;
  StartService(ConsistencyMode::kBsp);
  auto client = MustConnect(ClientOptions(service_->endpoint(), ConsistencyMode::kBsp));
  ASSERT_TRUE(client);
  int64_t clock = -1;
  ASSERT_TRUE(client->Hello(&clock).ok());
  EXPECT_EQ(clock, 0);
  ASSERT_TRUE(client->InitPush().ok());
  std::fill_n(w_.mutable_cpu_data(), 6, 0.f);  // the pull must bring them back
  ASSERT_TRUE(client->Pull(0).ok());
  int64_t version = -1;
  ASSERT_TRUE(client->WaitPull(&version, nullptr).ok());
  EXPECT_EQ(version, 0);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w_.cpu_data()[i], kInitial[static_cast<size_t>(i)]);
  for (int i = 0; i < 6; ++i) w_.mutable_cpu_diff()[i] = Grad(0, 0, i);
  for (int i = 0; i < 2; ++i) b_.mutable_cpu_diff()[i] = Grad(0, 0, 6 + i);
  ASSERT_TRUE(client->Push({1}, 0, -1).ok());  // per layer, the last one first
  ASSERT_TRUE(client->Push({0}, 0, -1).ok());
  ASSERT_TRUE(client->Flush().ok());
  ASSERT_TRUE(client->Pull(1).ok());
  ASSERT_TRUE(client->WaitPull(&version, nullptr).ok());
  EXPECT_EQ(version, 1);
  const std::vector<double> expected = HandBsp(1, 1);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(w_.cpu_data()[i], expected[static_cast<size_t>(i)]);
  for (int i = 0; i < 2; ++i)
    EXPECT_FLOAT_EQ(b_.cpu_data()[i], expected[static_cast<size_t>(6 + i)]);
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_EQ((*stats)[0].pushes_applied(), 1);
  EXPECT_EQ((*stats)[0].bad_messages(), 0);
  ASSERT_TRUE(client->Shutdown().ok());
  thread_.join();
}

TEST_F(PsClientTest, HeartbeatsKeepAnIdleWorkerAlive) {
  ShardLoopOptions options;
  options.poll = 10ms;
  options.tick = 20ms;
  // Heartbeats every 50 ms against a 1 s warning: only a stall of the
  // machine near a second could make a heartbeating worker look silent.
  options.silence_warning = 1s;
  StartService(ConsistencyMode::kAsp, options);
  PsClientOptions with = ClientOptions(service_->endpoint(), ConsistencyMode::kAsp);
  with.heartbeat_interval = 50ms;
  auto client = MustConnect(with);
  ASSERT_TRUE(client);
  int64_t clock = 0;
  ASSERT_TRUE(client->Hello(&clock).ok());
  std::this_thread::sleep_for(2500ms);  // "computing": the client's thread sends nothing
  EXPECT_FALSE(AnyLogContains("silent"));

  client.reset();  // without heartbeats the same pause is reported
  PsClientOptions without = with;
  without.heartbeat_interval = 0ms;
  client = MustConnect(without);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Hello(&clock).ok());
  EXPECT_TRUE(LogAppears("warning: worker 0 (clock 0) has been silent for "));
}

TEST_F(PsClientTest, AServerInAnotherModeIsAnError) {
  StartService(ConsistencyMode::kSsp);
  auto client = MustConnect(ClientOptions(service_->endpoint(), ConsistencyMode::kBsp));
  ASSERT_TRUE(client);
  int64_t clock = 0;
  EXPECT_EQ(client->Hello(&clock).message(),
            "server 0 (" + service_->endpoint() + ") runs ssp, this worker bsp");
}

// fp16 pulls through a real shard: the blobs get the rounded weights, the
// shard keeps float32 masters (step 2 starts from the float32 step 1, which
// the hand computation in double follows), and the reply bytes are halved.
TEST_F(PsClientTest, Fp16PullsBringTheRoundedFloat32Masters) {
  job_key_ = 43;
  StartService(ConsistencyMode::kBsp);
  PsClientOptions options = ClientOptions(service_->endpoint(), ConsistencyMode::kBsp);
  options.pull_compression = pstrain::FLOAT16;
  auto client = MustConnect(options);
  ASSERT_TRUE(client);
  int64_t clock = -1;
  ASSERT_TRUE(client->Hello(&clock).ok());
  ASSERT_TRUE(client->InitPush().ok());
  EXPECT_TRUE(LogAppears("worker 0 pulls in FLOAT16"));
  auto half = [](double v) {
    return transport::HalfToFloat(transport::FloatToHalf(static_cast<float>(v)));
  };
  int64_t version = -1;
  for (int t = 0; t < 3; ++t) {
    const int64_t received = client->traffic().bytes_received;
    ASSERT_TRUE(client->Pull(t).ok());
    ASSERT_TRUE(client->WaitPull(&version, nullptr).ok());
    EXPECT_EQ(version, t);
    // 8 values in 3 chunks of 4, 2, 2: 2 + 1 + 1 words, 16 bytes of payload.
    const int64_t header_bytes = client->traffic().bytes_received - received - 16;
    EXPECT_GT(header_bytes, 0);
    EXPECT_LT(header_bytes, 80);
    const std::vector<double> master = HandBsp(1, t);
    int rounded = 0;
    for (int i = 0; i < 8; ++i) {
      const float got = i < 6 ? w_.cpu_data()[i] : b_.cpu_data()[i - 6];
      EXPECT_EQ(got, half(master[static_cast<size_t>(i)])) << "t " << t << " value " << i;
      rounded += got != static_cast<float>(master[static_cast<size_t>(i)]);
    }
    if (t > 0) {
      EXPECT_GT(rounded, 0) << "every master of step " << t << " is an fp16 value";
    }
    for (int i = 0; i < 6; ++i) w_.mutable_cpu_diff()[i] = Grad(0, t, i);
    for (int i = 0; i < 2; ++i) b_.mutable_cpu_diff()[i] = Grad(0, t, 6 + i);
    ASSERT_TRUE(client->Push({1, 0}, t, -1).ok());
    ASSERT_TRUE(client->Flush().ok());
  }
  ASSERT_TRUE(client->Shutdown().ok());
  thread_.join();
}

// Each request and pull DEALER wrapped in a FaultChannel that fails its first
// `fail_sends` sends with `code`; the wrappers, in connection order (request
// channel of shard 0 first), stay reachable for their counts.
struct FailingSends {
  int fail_sends = 0;
  StatusCode code = StatusCode::kUnavailable;
  std::vector<transport::FaultChannel*> channels;
  void Install(PsClientOptions* options) {
    options->wrap_channel = [this](std::unique_ptr<transport::Channel> inner) {
      transport::FaultSpec spec;
      spec.fail_sends = fail_sends;
      spec.fail_code = code;
      auto wrapped = std::make_unique<transport::FaultChannel>(std::move(inner), spec);
      channels.push_back(wrapped.get());
      return std::unique_ptr<transport::Channel>(std::move(wrapped));
    };
  }
};

TEST_F(PsClientTest, ARetryableSendFailureIsSentAgain) {
  StartService(ConsistencyMode::kBsp);
  PsClientOptions options = ClientOptions(service_->endpoint(), ConsistencyMode::kBsp);
  FailingSends failing{2, StatusCode::kUnavailable, {}};
  failing.Install(&options);
  auto client = MustConnect(options);
  ASSERT_TRUE(client);
  int64_t clock = -1;
  Status hello = client->Hello(&clock);
  ASSERT_TRUE(hello.ok()) << hello.message();
  EXPECT_EQ(clock, 0);
  ASSERT_EQ(failing.channels.size(), 2u);  // shard 0's request and pull connections
  EXPECT_EQ(failing.channels[0]->counts().failed, 2);
  EXPECT_EQ(failing.channels[0]->counts().messages, 3);  // two failures, then the HELLO
  EXPECT_EQ(client->traffic().send_retries, 2);
}

TEST_F(PsClientTest, ANonRetryableSendFailureIsNotSentAgain) {
  StartService(ConsistencyMode::kBsp);
  PsClientOptions options = ClientOptions(service_->endpoint(), ConsistencyMode::kBsp);
  FailingSends failing{2, StatusCode::kInvalidArgument, {}};
  failing.Install(&options);
  auto client = MustConnect(options);
  ASSERT_TRUE(client);
  int64_t clock = -1;
  Status hello = client->Hello(&clock);
  EXPECT_EQ(hello.ToString(), "InvalidArgument: server 0 (" + service_->endpoint() +
                                  "): " + service_->endpoint() + ": send: injected failure 1 of 2");
  EXPECT_EQ(failing.channels[0]->counts().messages, 1);
  EXPECT_EQ(client->traffic().send_retries, 0);
}

TEST_F(PsClientTest, RetriesEndAtTheTimeoutWithTheLastFailure) {
  StartService(ConsistencyMode::kBsp);
  PsClientOptions options = ClientOptions(service_->endpoint(), ConsistencyMode::kBsp);
  options.timeout = 1000ms;
  FailingSends failing{1000, StatusCode::kDeadlineExceeded, {}};
  failing.Install(&options);
  auto client = MustConnect(options);
  ASSERT_TRUE(client);
  int64_t clock = -1;
  const auto start = std::chrono::steady_clock::now();
  Status hello = client->Hello(&clock);
  const auto took = std::chrono::steady_clock::now() - start;
  // Tries after 0, 50, 150, 350 and 750 ms on an idle machine; never a wait
  // that would end past the timeout.
  const int64_t tries = failing.channels[0]->counts().failed;
  EXPECT_GE(tries, 3);
  EXPECT_LE(tries, 5);
  EXPECT_EQ(client->traffic().send_retries, tries - 1);
  EXPECT_EQ(hello.ToString(), "DeadlineExceeded: server 0 (" + service_->endpoint() + ") (" +
                                  std::to_string(tries) + " tries): " + service_->endpoint() +
                                  ": send: injected failure " + std::to_string(tries) + " of 1000");
  EXPECT_GE(took, 150ms);  // at least the waits before the third try
  EXPECT_LT(took, 1000ms + 500ms);
}

// A bare ROUTER stands in for server 0: it answers what the test makes it.
class FakeServerTest : public PsClientTest {
 protected:
  void SetUp() override {
    PsClientTest::SetUp();
    auto router = transport::BindRouter(context_, "tcp://127.0.0.1:0");
    ASSERT_TRUE(router.ok()) << router.status().message();
    router_ = std::move(router).value();
  }
  void TearDown() override {
    router_.reset();
    PsClientTest::TearDown();
  }
  // Receives the client's next message of `type` (skipping heartbeats).
  transport::InMessage Next(pstrain::MessageType type) {
    while (true) {
      transport::InMessage m = testing::MustReceive(*router_);
      if (m.header.type() != pstrain::HEARTBEAT || type == pstrain::HEARTBEAT) {
        EXPECT_EQ(m.header.type(), type);
        return m;
      }
    }
  }

  // Answers the client's HELLO as shard 0 of a bsp job of one worker, at clock 0.
  void AckHello() {
    transport::InMessage hello = Next(pstrain::HELLO);
    const transport::Origin server{pstrain::SERVER, 0, 0};
    EXPECT_TRUE(
        router_
            ->Send(hello.peer, OutMessage{transport::HelloAckHeader(server, hello.header, 0, 0,
                                                                    ConsistencyMode::kBsp, 1),
                                          {}})
            .ok());
  }

  std::string PullAnsweredWith(const std::function<void(OutMessage&)>& edit);
  std::unique_ptr<transport::Channel> router_;
};

TEST_F(FakeServerTest, ASilentServerIsAnErrorNamingItsAddress) {
  PsClientOptions options = ClientOptions(router_->endpoint(), ConsistencyMode::kBsp);
  options.timeout = 300ms;
  auto client = MustConnect(options);
  ASSERT_TRUE(client);
  int64_t clock = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(client->Hello(&clock).message(),
            "no answer from server 0 (" + router_->endpoint() + ") for 0.3 s");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // the 0.3 s bound, not a hang
  // The silent server heard the HELLO, then heartbeats.
  EXPECT_EQ(Next(pstrain::HELLO).header.world_size(), 1);
}

// A server from before 16-bit pulls ignores HELLO's pull_dtype and answers
// without it: the worker stops at HELLO with an error naming the server,
// instead of reading float32 replies as fp16 (or the reverse).
TEST_F(FakeServerTest, AServerWithoutSixteenBitPullsIsRefusedAtHello) {
  PsClientOptions options = ClientOptions(router_->endpoint(), ConsistencyMode::kBsp);
  options.pull_compression = pstrain::BFLOAT16;
  auto client = MustConnect(options);
  ASSERT_TRUE(client);
  std::thread answer([this] {
    transport::InMessage hello = Next(pstrain::HELLO);
    EXPECT_EQ(hello.header.pull_dtype(), pstrain::BFLOAT16);
    pstrain::Header ack = transport::HelloAckHeader({pstrain::SERVER, 0, 0}, hello.header, 0, 0,
                                                    ConsistencyMode::kBsp, 1);
    ack.clear_pull_dtype();  // what an older server sends
    ASSERT_TRUE(router_->Send(hello.peer, OutMessage{ack, {}}).ok());
  });
  int64_t clock = 0;
  EXPECT_EQ(client->Hello(&clock).message(),
            "server 0 (" + router_->endpoint() +
                "): HELLO_ACK: this worker asked for BFLOAT16 pulls and the server does not send "
                "them (a ps-server from before 16-bit pulls); run the same version everywhere, "
                "or pull in FLOAT32 (transport.pull_compression: none)");
  answer.join();
}

// A client of this fixture says HELLO and pulls iteration 0; the fake shard
// answers chunk 1 with `reply` (made by `edit` from a plain reply: version 0,
// 3 chunks in all). Returns WaitPull's message; no value reached the blobs.
std::string FakeServerTest::PullAnsweredWith(const std::function<void(OutMessage&)>& edit) {
  auto client = MustConnect(ClientOptions(router_->endpoint(), ConsistencyMode::kBsp));
  EXPECT_TRUE(client);
  if (!client) return "";
  std::thread answer([&] {
    AckHello();
    const transport::Origin server{pstrain::SERVER, 0, 0};
    transport::InMessage pull = Next(pstrain::PULL);
    OutMessage reply{transport::ReplyHeader(server, pull.header, pstrain::PULL_REPLY), {}};
    reply.header.set_version(0);
    reply.header.set_reply_chunks_total(3);
    edit(reply);
    EXPECT_TRUE(router_->Send(pull.peer, std::move(reply)).ok());
  });
  int64_t clock = 0;
  EXPECT_TRUE(client->Hello(&clock).ok());
  EXPECT_TRUE(client->Pull(0).ok());
  int64_t version = 0;
  std::string message = client->WaitPull(&version, nullptr).message();
  answer.join();
  EXPECT_EQ(w_.cpu_data()[4], kInitial[4]);  // nothing was copied in
  return message;
}

// A reply in another encoding than the one granted is an error.
TEST_F(FakeServerTest, APullReplyInAnotherEncodingIsAnError) {
  EXPECT_EQ(PullAnsweredWith([](OutMessage& reply) {
              reply.header.set_dtype(pstrain::FLOAT16);
              transport::AddChunk(reply.header, 1, 2);
              reply.payloads.push_back(Payload::Of(std::make_shared<std::vector<float>>(1, 9.f)));
            }),
            "server 0 (" + router_->endpoint() +
                ") sent a FLOAT16 pull reply, this worker pulls in FLOAT32");
}

TEST_F(FakeServerTest, AMalformedReplyIsAnErrorNamingTheServer) {
  // Chunk 1 holds 2 values; this reply claims 3.
  EXPECT_EQ(PullAnsweredWith([](OutMessage& reply) {
              transport::AddChunk(reply.header, 1, 3);
              reply.payloads.push_back(Payload::Of(std::make_shared<std::vector<float>>(3, 9.f)));
            }),
            "server 0 (" + router_->endpoint() +
                "): PULL_REPLY from server 0: chunk 1: header says 3 values, the chunk has 2");
}

// Factor relay replies (common/ps/factor_relay.hpp): "w" (2 x 3) has chunks
// 0 (rows 0-1) and 1 (row 1) on the one server, so a relayed worker's L is
// samples x 2 and its R samples x 3.
void AddRelay(OutMessage& reply, uint32_t worker, size_t left_values) {
  pstrain::RelayedFactors* r = reply.header.add_relay();
  r->set_param(0);
  r->set_worker(worker);
  r->set_samples(1);
  r->set_cols(3);
  r->set_right(true);
  reply.payloads.push_back(Payload::Of(std::make_shared<std::vector<float>>(left_values, 1.f)));
  reply.payloads.push_back(Payload::Of(std::make_shared<std::vector<float>>(3, 1.f)));
}

void RelayChunks(OutMessage& reply) {
  reply.header.add_relayed_chunks(0);
  reply.header.add_relayed_chunks(1);
  reply.header.set_relay_scale(1.f);
}

TEST_F(FakeServerTest, ARelayOfTheWrongSizeIsAnErrorNamingTheServer) {
  EXPECT_EQ(PullAnsweredWith([](OutMessage& reply) {
              AddRelay(reply, 0, 3);
              RelayChunks(reply);
            }),
            "server 0 (" + router_->endpoint() +
                "): PULL_REPLY from server 0: relay: parameter 0: worker 0's L has 12 bytes, "
                "1 x 2 float32 need 8");
}

TEST_F(FakeServerTest, ARelayOfAnotherWorkerCountIsAnErrorNamingTheServer) {
  EXPECT_EQ(PullAnsweredWith([](OutMessage& reply) {
              AddRelay(reply, 0, 2);
              AddRelay(reply, 1, 2);
              RelayChunks(reply);
            }),
            "server 0 (" + router_->endpoint() +
                "): PULL_REPLY from server 0: relay: parameter 0: worker 1 is not in this job "
                "(1 workers)");
}

TEST_F(FakeServerTest, ARelayNoPullAskedForIsAnErrorNamingTheServer) {
  EXPECT_EQ(PullAnsweredWith([](OutMessage& reply) {
              AddRelay(reply, 0, 2);
              RelayChunks(reply);
            }),
            "server 0 (" + router_->endpoint() + ") sent factors or history no pull asked for");
}

}  // namespace
}  // namespace pstrain

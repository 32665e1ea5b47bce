// ShardLoop, the ps-server loop, driven on real ZeroMQ sockets (tcp on
// 127.0.0.1, ephemeral ports) with Run on a thread of the test: a push/pull
// round trip against hand-computed weights, bad messages dropped at entry
// without an answer and counted in STATS, the liveness warnings, the idle
// exit, and Stop. Every wait is bounded.
#include "server/shard_loop.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include "common/transport/protocol.hpp"
#include "tests/cpp/shard_state_test_util.hpp"
#include "tests/cpp/transport_test_util.hpp"

namespace pstrain::server {
namespace {

using namespace std::chrono_literals;
using namespace test_support;  // NOLINT: the shard suites' net and gradients
using Clock = std::chrono::steady_clock;
using pstrain::testing::MustReceive;
using transport::Frame;
using transport::InMessage;
using transport::OutMessage;
using transport::Payload;

constexpr uint64_t kJobKey = 5;

// Worker `w`'s header of `type`, with the job's key.
pstrain::Header WorkerHeader(pstrain::MessageType type, int w) {
  return transport::NewHeader({pstrain::WORKER, w, kJobKey}, type);
}

// `header` with chunks `ids` of the test net, the values `values` (flat, by
// the net's value index).
OutMessage WithChunks(pstrain::Header header, const std::vector<uint32_t>& ids,
                      const std::vector<float>& values) {
  OutMessage m{std::move(header), {}};
  for (uint32_t id : ids) {
    auto chunk = std::make_shared<std::vector<float>>(values.begin() + Offset(id),
                                                      values.begin() + Offset(id) + Length(id));
    transport::AddChunk(m.header, id, chunk->size());
    m.payloads.push_back(Payload::Of(chunk));
  }
  return m;
}

class ShardLoopTest : public ::testing::Test {
 protected:
  void TearDown() override {
    channels_.clear();
    Join();
  }

  ShardConfig JobConfig(ConsistencyMode mode, int workers) {
    ShardConfig c = Config(mode, workers);
    c.job_key = kJobKey;
    return c;
  }

  // Creates the service and runs it on a thread.
  void Start(ShardConfig config, ShardLoopOptions options = {}) {
    options.bind = "tcp://127.0.0.1:0";
    options.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex_);
      logs_.push_back(line);
    };
    auto created = ShardLoop::Create(context_, ShardState(std::move(config)), options);
    ASSERT_TRUE(created.ok()) << created.status().message();
    service_ = std::move(created).value();
    thread_ = std::thread([this] { ended_.emplace(service_->Run()); });
  }

  // Waits for Run to return (Stop first when `stop`).
  void Join(bool stop = true) {
    if (!thread_.joinable()) return;
    if (stop) service_->Stop();
    thread_.join();
  }

  transport::Channel& Connect(const std::string& identity) {
    transport::SocketOptions options;
    options.identity = identity;
    auto dealer = transport::ConnectDealer(context_, service_->endpoint(), options);
    EXPECT_TRUE(dealer.ok()) << dealer.status().message();
    channels_.push_back(std::move(dealer).value());
    return *channels_.back();
  }

  // Sends `message` on `channel` and returns the answer, expecting `type`.
  InMessage Ask(transport::Channel& channel, OutMessage message, pstrain::MessageType type) {
    EXPECT_TRUE(channel.Send("", std::move(message)).ok());
    InMessage reply = MustReceive(channel);
    EXPECT_EQ(reply.header.type(), type) << reply.header.ShortDebugString();
    return reply;
  }

  // True once a log line contains `text` (within 10 s).
  bool Logged(const std::string& text) {
    return pstrain::testing::Eventually(
        [&] {
          std::lock_guard<std::mutex> lock(mutex_);
          for (const std::string& line : logs_) {
            if (line.find(text) != std::string::npos) return true;
          }
          return false;
        },
        10s);
  }
  std::vector<std::string> Logs() {
    std::lock_guard<std::mutex> lock(mutex_);
    return logs_;
  }

  // Greets the shard as worker 0 of `workers` and sends the initial weights.
  void HelloAndInit(transport::Channel& w0, int workers) {
    InMessage ack =
        Ask(w0, OutMessage{transport::HelloHeader({pstrain::WORKER, 0, kJobKey}, workers), {}},
            pstrain::HELLO_ACK);
    EXPECT_EQ(ack.header.clock(), 0);
    OutMessage init = WithChunks(WorkerHeader(pstrain::INIT_PUSH, 0), {0, 1, 2}, kInitial);
    for (const auto& p : Params()) *init.header.add_params() = p;
    Ask(w0, std::move(init), pstrain::INIT_ACK);
  }

  transport::Context context_;
  std::unique_ptr<ShardLoop> service_;
  std::vector<std::unique_ptr<transport::Channel>> channels_;  // closed before Join
  std::thread thread_;
  std::optional<Result<ShardLoop::Ending>> ended_;
  std::mutex mutex_;  // guards logs_ (the service thread writes them)
  std::vector<std::string> logs_;
};

TEST_F(ShardLoopTest, PushPullRoundTripGivesTheHandComputedStep) {
  Start(JobConfig(ConsistencyMode::kBsp, 1));
  transport::Channel& w0 = Connect("w0");
  InMessage ack = Ask(w0, OutMessage{transport::HelloHeader({pstrain::WORKER, 0, kJobKey}, 1), {}},
                      pstrain::HELLO_ACK);
  auto hello = transport::ReadHelloAck(ack.header);
  ASSERT_TRUE(hello.ok()) << hello.status().message();
  EXPECT_EQ(hello->mode, ConsistencyMode::kBsp);
  EXPECT_EQ(hello->version, 0);
  EXPECT_EQ(ack.header.job_key(), kJobKey);
  OutMessage init = WithChunks(WorkerHeader(pstrain::INIT_PUSH, 0), {0, 1, 2}, kInitial);
  for (const auto& p : Params()) *init.header.add_params() = p;
  Ask(w0, std::move(init), pstrain::INIT_ACK);

  InMessage weights =
      Ask(w0, OutMessage{transport::PullHeader({pstrain::WORKER, 0, kJobKey}, 0), {}},
          pstrain::PULL_REPLY);
  ASSERT_EQ(weights.payload_count(), 3u);
  for (size_t c = 0; c < 3; ++c) {
    const uint32_t id = weights.header.chunks(static_cast<int>(c)).id();
    for (int64_t i = 0; i < Length(id); ++i) {
      EXPECT_EQ(weights.payload(c)[i], kInitial[static_cast<size_t>(Offset(id) + i)]);
    }
  }
  std::vector<float> grad(kValues);
  for (int i = 0; i < kValues; ++i) grad[static_cast<size_t>(i)] = Grad(0, 0, i);
  Ask(w0, WithChunks(transport::PushHeader({pstrain::WORKER, 0, kJobKey}, 0, -1), {0, 1, 2}, grad),
      pstrain::PUSH_ACK);
  weights = Ask(w0, OutMessage{transport::PullHeader({pstrain::WORKER, 0, kJobKey}, 1), {}},
                pstrain::PULL_REPLY);
  EXPECT_EQ(weights.header.version(), 1);
  const std::vector<double> expected = HandBsp(1, 1);  // lr 0.1, momentum 0.9, one step
  ASSERT_EQ(weights.payload_count(), 3u);
  for (size_t c = 0; c < 3; ++c) {
    const uint32_t id = weights.header.chunks(static_cast<int>(c)).id();
    for (int64_t i = 0; i < Length(id); ++i) {
      EXPECT_FLOAT_EQ(weights.payload(c)[i], expected[static_cast<size_t>(Offset(id) + i)]);
    }
  }

  InMessage stats = Ask(w0, OutMessage{WorkerHeader(pstrain::STATS, 0), {}}, pstrain::STATS);
  EXPECT_EQ(stats.header.stats().pushes_applied(), 1);
  EXPECT_EQ(stats.header.stats().bad_messages(), 0);
  Ask(w0, OutMessage{WorkerHeader(pstrain::SHUTDOWN, 0), {}}, pstrain::SHUTDOWN);
  Join(/*stop=*/false);  // SHUTDOWN ends Run by itself
  ASSERT_TRUE(ended_.has_value() && ended_->ok());
  EXPECT_EQ(ended_->value(), ShardLoop::Ending::kShutdown);
  EXPECT_EQ(service_->shard().version(), 1);
}

TEST_F(ShardLoopTest, BadMessagesAreDroppedUnansweredAndCountedInStats) {
  ShardLoopOptions options;
  options.drop_log_lines = 1000;  // every drop in full (the bound itself: the DropLog tests)
  Start(JobConfig(ConsistencyMode::kAsp, 2), options);
  transport::Channel& w0 = Connect("w0");
  HelloAndInit(w0, 2);
  const std::vector<float> grad(kValues, 1.f);
  std::vector<OutMessage> bad;
  // A stranger's job key.
  bad.push_back(OutMessage{transport::HelloHeader({pstrain::WORKER, 0, 999}, 2), {}});
  // A worker rank the job does not have.
  bad.push_back(WithChunks(transport::PushHeader({pstrain::WORKER, 2, kJobKey}, 0, -1), {0}, grad));
  // A world size the job does not have; a HELLO without one.
  bad.push_back(OutMessage{transport::HelloHeader({pstrain::WORKER, 1, kJobKey}, 3), {}});
  bad.push_back(OutMessage{WorkerHeader(pstrain::HELLO, 1), {}});
  // A kind servers do not accept, and one from the wrong role.
  bad.push_back(OutMessage{WorkerHeader(pstrain::PULL_REPLY, 0), {}});
  pstrain::Header partial = WorkerHeader(pstrain::NORM_PARTIAL, 0);
  partial.set_clock(0);
  partial.set_sum_squares(1);
  bad.push_back(OutMessage{partial, {}});
  // Chunk lists: a chunk twice, a wrong length, a chunk that does not exist.
  bad.push_back(
      WithChunks(transport::PushHeader({pstrain::WORKER, 0, kJobKey}, 0, -1), {0, 0}, grad));
  OutMessage wrong_length =
      WithChunks(transport::PushHeader({pstrain::WORKER, 0, kJobKey}, 0, -1), {}, grad);
  transport::AddChunk(wrong_length.header, 1, 3);
  wrong_length.payloads.push_back(Payload::Of(std::make_shared<std::vector<float>>(3, 1.f)));
  bad.push_back(std::move(wrong_length));
  OutMessage missing =
      WithChunks(transport::PushHeader({pstrain::WORKER, 0, kJobKey}, 0, -1), {}, grad);
  transport::AddChunk(missing.header, 7, 2);
  missing.payloads.push_back(Payload::Of(std::make_shared<std::vector<float>>(2, 1.f)));
  bad.push_back(std::move(missing));
  // A pull without a clock.
  bad.push_back(OutMessage{WorkerHeader(pstrain::PULL, 0), {}});
  const int64_t kBadHeaders = static_cast<int64_t>(bad.size());
  for (OutMessage& m : bad) ASSERT_TRUE(w0.Send("", std::move(m)).ok());
  // Frames that are no header at all.
  constexpr int kGarbage = 25;
  for (int i = 0; i < kGarbage; ++i) {
    std::vector<Frame> frames;
    frames.emplace_back(std::string("\x01\x02 not a header"));
    frames.emplace_back(std::string("payload"));
    ASSERT_TRUE(w0.SendFrames("", std::move(frames)).ok());
  }
  // One connection keeps its order: the STATS answer is the first message
  // back, so none of the bad ones was answered.
  InMessage stats = Ask(w0, OutMessage{WorkerHeader(pstrain::STATS, 0), {}}, pstrain::STATS);
  EXPECT_EQ(stats.header.stats().bad_messages(), kBadHeaders + kGarbage);
  EXPECT_EQ(stats.header.stats().pushes_applied(), 0);
  EXPECT_EQ(stats.header.stats().worker_clocks(0), 0);
  // Each reason is logged once per message, with the sender.
  const std::vector<std::string> expected = {
      "dropped HELLO from worker 0 (peer 'w0'): job key mismatch",
      "dropped PUSH from worker 2 (peer 'w0'): worker 2 is not in this job (2 workers)",
      "dropped HELLO from worker 1 (peer 'w0'): world size 3 does not match this job (2 workers)",
      "dropped HELLO from worker 1 (peer 'w0'): HELLO has no world_size",
      "dropped PULL_REPLY from worker 0 (peer 'w0'): a server does not accept PULL_REPLY",
      "dropped NORM_PARTIAL from worker 0 (peer 'w0'): a server accepts NORM_PARTIAL only from "
      "a server",
      "dropped PUSH from worker 0 (peer 'w0'): chunk 0 appears twice",
      "dropped PUSH from worker 0 (peer 'w0'): chunk 1: header says 3 values, the chunk has 2",
      "dropped PUSH from worker 0 (peer 'w0'): chunk 7 does not exist (3 chunks)",
      "dropped PULL from worker 0 (peer 'w0'): PULL has no clock",
  };
  std::vector<std::string> logs = Logs();
  for (const std::string& line : expected) {
    EXPECT_EQ(std::count(logs.begin(), logs.end(), line), 1) << line;
  }
  const std::string garbage = "dropped a message: " + service_->endpoint() +
                              ": message from peer 'w0': header does not parse";
  EXPECT_EQ(std::count(logs.begin(), logs.end(), garbage), kGarbage);
  // The shard still works: a good push is applied.
  Ask(w0, WithChunks(transport::PushHeader({pstrain::WORKER, 0, kJobKey}, 0, -1), {0, 1, 2}, grad),
      pstrain::PUSH_ACK);
  stats = Ask(w0, OutMessage{WorkerHeader(pstrain::STATS, 0), {}}, pstrain::STATS);
  EXPECT_EQ(stats.header.stats().worker_clocks(0), 1);
  EXPECT_EQ(stats.header.stats().bad_messages(), kBadHeaders + kGarbage);
}

TEST_F(ShardLoopTest, StopReturnsPromptly) {
  ShardLoopOptions options;
  options.poll = 50ms;
  Start(JobConfig(ConsistencyMode::kSsp, 1), options);
  std::this_thread::sleep_for(100ms);  // Run is polling
  const auto start = Clock::now();
  Join();
  const auto took = Clock::now() - start;
  EXPECT_LT(took, 5s);  // a poll of 50 ms, not the idle bound
  ASSERT_TRUE(ended_.has_value() && ended_->ok());
  EXPECT_EQ(ended_->value(), ShardLoop::Ending::kStopped);
}

TEST_F(ShardLoopTest, IdleExitIsAnErrorAfterTheBound) {
  ShardLoopOptions options;
  options.poll = 20ms;
  options.idle_exit = 200ms;
  const auto start = Clock::now();
  Start(JobConfig(ConsistencyMode::kSsp, 1), options);
  Join(/*stop=*/false);
  EXPECT_GE(Clock::now() - start, 200ms);
  ASSERT_TRUE(ended_.has_value());
  ASSERT_FALSE(ended_->ok());
  EXPECT_EQ(ended_->status().message().rfind("no message for ", 0), 0u)
      << ended_->status().message();
}

TEST_F(ShardLoopTest, WarnsOnceAboutASilentWorkerAndWhenItIsBack) {
  ShardLoopOptions options;
  options.poll = 10ms;
  options.tick = 20ms;
  // 1 s: worker 0's heartbeats (every 20 ms) stay far inside it even when
  // the loaded machine delays them.
  options.silence_warning = 1s;
  Start(JobConfig(ConsistencyMode::kSsp, 2), options);
  transport::Channel& w0 = Connect("w0");
  transport::Channel& w1 = Connect("w1");
  HelloAndInit(w0, 2);
  Ask(w1, OutMessage{transport::HelloHeader({pstrain::WORKER, 1, kJobKey}, 2), {}},
      pstrain::HELLO_ACK);
  Ask(w1,
      WithChunks(transport::PushHeader({pstrain::WORKER, 1, kJobKey}, 0, -1), {0, 1, 2},
                 std::vector<float>(kValues, 1.f)),
      pstrain::PUSH_ACK);
  // Worker 0 keeps sending heartbeats until the warning about worker 1
  // (silent at clock 1) is logged.
  const std::string warning = "warning: worker 1 (clock 1) has been silent for ";
  auto warned = [&] {
    for (const std::string& line : Logs()) {
      if (line.find(warning) != std::string::npos) return true;
    }
    return false;
  };
  const auto deadline = Clock::now() + 20s;
  while (!warned() && Clock::now() < deadline) {
    ASSERT_TRUE(w0.Send("", OutMessage{WorkerHeader(pstrain::HEARTBEAT, 0), {}}).ok());
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(warned());
  std::vector<std::string> logs = Logs();
  EXPECT_EQ(
      std::count_if(logs.begin(), logs.end(),
                    [](const std::string& l) { return l.find("silent") != std::string::npos; }),
      1);  // once, and never worker 0
  ASSERT_TRUE(w1.Send("", OutMessage{WorkerHeader(pstrain::HEARTBEAT, 1), {}}).ok());
  EXPECT_TRUE(Logged("worker 1 is heard from again after "));
  // Heartbeats are never answered.
  EXPECT_TRUE(pstrain::testing::NothingArrives(w0, 50ms));
}

TEST_F(ShardLoopTest, AWorkerThatFinishedTrainingIsNotReportedSilent) {
  ShardLoopOptions options;
  options.poll = 10ms;
  options.tick = 20ms;
  options.silence_warning = 300ms;
  options.max_iter = 1;
  Start(JobConfig(ConsistencyMode::kAsp, 1), options);
  transport::Channel& w0 = Connect("w0");
  HelloAndInit(w0, 1);
  Ask(w0,
      WithChunks(transport::PushHeader({pstrain::WORKER, 0, kJobKey}, 0, -1), {0, 1, 2},
                 std::vector<float>(kValues, 1.f)),
      pstrain::PUSH_ACK);  // clock 1 = max_iter: done
  std::this_thread::sleep_for(600ms);
  for (const std::string& line : Logs()) EXPECT_EQ(line.find("silent"), std::string::npos) << line;
}

}  // namespace
}  // namespace pstrain::server

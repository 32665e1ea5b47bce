// The step gate (ps-server --step-gate, server/policies/step_gate.cpp; GATE in
// docs/wire-protocol.md): real PsClients against a real ShardLoop (tcp on
// 127.0.0.1, Run on a thread). bsp with two workers: no pull is answered
// before the first GATE, with the gate at 3 both workers run exactly
// iterations 0..2 and their pulls for 3 wait (for the gate, the shard's wait
// log says), at 5 they reach 5, and the weights are bit-identical to a shard
// without a gate fed the same pushes (and to the hand-computed trajectory).
// ssp staleness 2: the gate stops a fast worker that the bound would let go
// on; WaitForClock returns only once the slow worker caught up. The errors,
// exactly: a lowered gate, a shard without the gate, GATE messages the
// validator drops. And by hand: the gate starts at the resumed clock, and the
// policy is composed around every base. Every wait is bounded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/transport/protocol.hpp"
#include "common/transport/validate.hpp"
#include "server/shard_loop.hpp"
#include "tests/cpp/shard_state_test_util.hpp"
#include "tests/cpp/transport_test_util.hpp"
#include "worker/ps/ps_client.hpp"

namespace pstrain {
namespace {

using namespace std::chrono_literals;
using namespace server::test_support;  // NOLINT: the shard suites' net and gradients

constexpr uint64_t kJobKey = 57;

// One worker's (or the driver's) blobs "w" {2, 3} and "b" {2} and its client.
struct Node {
  Blob w, b;
  std::unique_ptr<PsClient> client;
};

class StepGateTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (thread_.joinable()) {
      service_->Stop();
      thread_.join();
    }
  }

  void StartService(server::ShardConfig config) {
    config.job_key = kJobKey;
    config.wait_warn_ms = 50;  // the wait log says what a pull waits for
    server::ShardLoopOptions options;
    options.bind = "tcp://127.0.0.1:0";
    options.tick = 20ms;
    options.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex_);
      logs_.push_back(line);
    };
    auto created = server::ShardLoop::Create(context_, server::ShardState(std::move(config)),
                                             options);
    ASSERT_TRUE(created.ok()) << created.status().message();
    service_ = std::move(created).value();
    thread_ = std::thread([this] { (void)service_->Run(); });
  }

  // Worker `rank` of `world` (greeted with HELLO), or without hello the driver (CONTROL 0).
  std::unique_ptr<Node> Connect(int rank, int world, ConsistencyMode mode, bool hello) {
    auto node = std::make_unique<Node>();
    node->w.Reshape({2, 3});
    node->b.Reshape({2});
    std::copy(kInitial.begin(), kInitial.begin() + 6, node->w.mutable_cpu_data());
    std::copy(kInitial.begin() + 6, kInitial.end(), node->b.mutable_cpu_data());
    PsClientOptions o;
    o.servers = {service_->endpoint()};
    o.role = hello ? pstrain::WORKER : pstrain::CONTROL;
    o.rank = rank;
    o.world_size = world;
    o.mode = mode;
    o.chunk_bytes = 16;
    o.timeout = 10s;
    o.job_key = kJobKey;
    auto client = PsClient::Connect(context_, o, {{"w", &node->w}, {"b", &node->b}});
    EXPECT_TRUE(client.ok()) << client.status().message();
    if (!client.ok()) return nullptr;
    node->client = std::move(client).value();
    if (hello) {
      int64_t clock = -1;
      EXPECT_TRUE(node->client->Hello(&clock).ok());
      EXPECT_EQ(clock, 0);
    }
    return node;
  }

  // Worker w's gradients of iteration t (Grad), pushed and acknowledged.
  static void PushIteration(Node& n, int w, int64_t t) {
    for (int i = 0; i < 6; ++i) n.w.mutable_cpu_diff()[i] = Grad(w, t, i);
    for (int i = 0; i < 2; ++i) n.b.mutable_cpu_diff()[i] = Grad(w, t, 6 + i);
    ASSERT_TRUE(n.client->Push({1}, t, -1).ok());
    ASSERT_TRUE(n.client->Push({0}, t, -1).ok());
    ASSERT_TRUE(n.client->Flush().ok());
  }
  // Pull(t) and WaitPull; returns the version.
  static int64_t PullNow(Node& n, int64_t t) {
    EXPECT_TRUE(n.client->Pull(t).ok());
    int64_t version = -1;
    Status s = n.client->WaitPull(&version, nullptr);
    EXPECT_TRUE(s.ok()) << s.message();
    return version;
  }

  bool LogAppears(const std::string& a, const std::string& b) {
    return testing::Eventually(
        [&] {
          std::lock_guard<std::mutex> lock(mutex_);
          for (const std::string& line : logs_) {
            if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
          }
          return false;
        },
        10s);
  }
  // The pull of `worker` for iteration t waits for the gate at `gate` (the shard's wait log).
  bool WaitsAtGate(int worker, int64_t t, int64_t gate) {
    return LogAppears("worker " + std::to_string(worker) + "'s pull for iteration " +
                          std::to_string(t) + " has waited",
                      "for the step gate (at " + std::to_string(gate) + ", raised by GATE)");
  }

  transport::Context context_;
  std::unique_ptr<server::ShardLoop> service_;
  std::thread thread_;
  std::mutex mutex_;  // guards logs_ (the service thread writes them)
  std::vector<std::string> logs_;
};

// A WaitPull on a thread of its own: done() turns true when it returns.
class PendingPull {
 public:
  PendingPull(Node& n, int64_t t) {
    EXPECT_TRUE(n.client->Pull(t).ok());
    thread_ = std::thread([this, &n] {
      status_ = n.client->WaitPull(&version_, nullptr);
      done_ = true;
    });
  }
  ~PendingPull() {
    if (thread_.joinable()) thread_.join();
  }
  bool done() const { return done_; }
  int64_t Join() {
    thread_.join();
    EXPECT_TRUE(status_.ok()) << status_.message();
    return version_;
  }

 private:
  std::thread thread_;
  std::atomic<bool> done_{false};
  Status status_;
  int64_t version_ = -1;
};

TEST_F(StepGateTest, BspWorkersRunExactlyToTheGateAndMatchAShardWithoutOne) {
  server::ShardConfig config = Config(ConsistencyMode::kBsp, 2);
  config.step_gate = true;
  StartService(config);
  auto w0 = Connect(0, 2, ConsistencyMode::kBsp, true);
  auto w1 = Connect(1, 2, ConsistencyMode::kBsp, true);
  auto driver = Connect(0, 2, ConsistencyMode::kBsp, false);  // control 0
  ASSERT_TRUE(w0 && w1 && driver);
  ASSERT_TRUE(w0->client->InitPush().ok());
  Node* workers[] = {w0.get(), w1.get()};

  {  // Closed at the start clock 0: the pulls for iteration 0 wait for the first GATE.
    PendingPull p0(*w0, 0), p1(*w1, 0);
    EXPECT_TRUE(WaitsAtGate(0, 0, 0));
    EXPECT_TRUE(WaitsAtGate(1, 0, 0));
    EXPECT_FALSE(p0.done());
    EXPECT_FALSE(p1.done());
    auto state = driver->client->SetGate(3);
    ASSERT_TRUE(state.ok()) << state.status().message();
    EXPECT_EQ(state->slowest_clock, 0);
    EXPECT_EQ(state->version, 0);
    EXPECT_EQ(p0.Join(), 0);
    EXPECT_EQ(p1.Join(), 0);
  }
  for (int64_t t = 0; t < 3; ++t) {
    if (t > 0) {
      for (Node* n : workers) EXPECT_EQ(PullNow(*n, t), t);
    }
    for (int w = 0; w < 2; ++w) PushIteration(*workers[w], w, t);
  }
  {  // Gate 3: both have run iterations 0, 1, 2 and their pulls for 3 wait.
    auto reached = driver->client->WaitForClock(3, 5s);
    ASSERT_TRUE(reached.ok()) << reached.status().message();
    EXPECT_EQ(reached->slowest_clock, 3);
    EXPECT_EQ(reached->version, 3);
    PendingPull p0(*w0, 3), p1(*w1, 3);
    EXPECT_TRUE(WaitsAtGate(0, 3, 3));
    EXPECT_TRUE(WaitsAtGate(1, 3, 3));
    EXPECT_FALSE(p0.done());
    EXPECT_FALSE(p1.done());
    auto state = driver->client->SetGate(5);
    ASSERT_TRUE(state.ok()) << state.status().message();
    EXPECT_EQ(state->slowest_clock, 3);
    EXPECT_EQ(state->version, 3);
    EXPECT_EQ(p0.Join(), 3);
    EXPECT_EQ(p1.Join(), 3);
  }
  for (int64_t t = 3; t < 5; ++t) {
    if (t > 3) {
      for (Node* n : workers) EXPECT_EQ(PullNow(*n, t), t);
    }
    for (int w = 0; w < 2; ++w) PushIteration(*workers[w], w, t);
  }
  auto reached = driver->client->WaitForClock(5, 5s);
  ASSERT_TRUE(reached.ok()) << reached.status().message();
  EXPECT_EQ(reached->slowest_clock, 5);
  EXPECT_EQ(reached->version, 5);
  PendingPull last(*w0, 5);
  EXPECT_TRUE(WaitsAtGate(0, 5, 5));
  EXPECT_FALSE(last.done());
  ASSERT_TRUE(driver->client->SetGate(6).ok());
  EXPECT_EQ(last.Join(), 5);

  // The same pushes into a shard without a gate, by hand.
  Shard plain(Config(ConsistencyMode::kBsp, 2));
  (void)plain.Send(Hello(0, 2));
  (void)plain.Send(Hello(1, 2));
  (void)plain.Send(Init(0, 1));
  for (int64_t t = 0; t < 5; ++t) {
    for (int w = 0; w < 2; ++w) (void)plain.Send(Push(w, t, {0, 1, 2}));
  }
  ASSERT_EQ(plain.server.version(), 5);
  const std::vector<float> want = plain.Weights();
  const std::vector<double> hand = HandBsp(2, 5);
  for (int i = 0; i < kValues; ++i) {
    const float got = i < 6 ? w0->w.cpu_data()[i] : w0->b.cpu_data()[i - 6];
    EXPECT_EQ(got, want[static_cast<size_t>(i)]) << "value " << i;  // bit for bit
    EXPECT_NEAR(got, hand[static_cast<size_t>(i)], 1e-5) << "value " << i;
  }
  ASSERT_TRUE(driver->client->Shutdown().ok());
  thread_.join();
}

TEST_F(StepGateTest, SspFastWorkerStopsAtTheGateUntilTheSlowOneCatchesUp) {
  server::ShardConfig config = Config(ConsistencyMode::kSsp, 2, /*staleness=*/2);
  config.step_gate = true;
  StartService(config);
  auto fast = Connect(0, 2, ConsistencyMode::kSsp, true);
  auto slow = Connect(1, 2, ConsistencyMode::kSsp, true);
  auto driver = Connect(0, 2, ConsistencyMode::kSsp, false);
  ASSERT_TRUE(fast && slow && driver);
  ASSERT_TRUE(fast->client->InitPush().ok());
  ASSERT_TRUE(driver->client->SetGate(3).ok());
  // The slow worker does iteration 0, the fast one 0, 1, 2.
  PullNow(*slow, 0);
  PushIteration(*slow, 1, 0);
  for (int64_t t = 0; t < 3; ++t) {
    PullNow(*fast, t);
    PushIteration(*fast, 0, t);
  }
  // Staleness 2 would answer the fast worker's pull for 3 (every clock >= 1); the gate holds it.
  PendingPull fast3(*fast, 3);
  EXPECT_TRUE(WaitsAtGate(0, 3, 3));
  EXPECT_FALSE(fast3.done());
  auto early = driver->client->WaitForClock(3, 300ms);
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().message(),
            "waited 0.3 s for every worker to reach clock 3; server 0 (" + service_->endpoint() +
                ") has worker clocks [3, 1]");
  // The slow worker catches up to the gate; only then does WaitForClock return.
  for (int64_t t = 1; t < 3; ++t) {
    PullNow(*slow, t);
    PushIteration(*slow, 1, t);
  }
  auto reached = driver->client->WaitForClock(3, 5s);
  ASSERT_TRUE(reached.ok()) << reached.status().message();
  EXPECT_EQ(reached->slowest_clock, 3);
  EXPECT_EQ(reached->version, 3);  // 6 pushes applied / 2 workers
  PendingPull slow3(*slow, 3);
  EXPECT_TRUE(WaitsAtGate(1, 3, 3));
  EXPECT_FALSE(fast3.done());
  EXPECT_FALSE(slow3.done());
  auto state = driver->client->SetGate(4);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->slowest_clock, 3);
  EXPECT_EQ(fast3.Join(), 3);
  EXPECT_EQ(slow3.Join(), 3);
  ASSERT_TRUE(driver->client->Shutdown().ok());
  thread_.join();
}

TEST_F(StepGateTest, ALoweredGateIsRefusedNamingBothValues) {
  server::ShardConfig config = Config(ConsistencyMode::kAsp, 1);
  config.step_gate = true;
  StartService(config);
  auto driver = Connect(0, 1, ConsistencyMode::kAsp, false);
  ASSERT_TRUE(driver);
  ASSERT_TRUE(driver->client->SetGate(3).ok());
  auto same = driver->client->SetGate(3);  // not lower: fine
  ASSERT_TRUE(same.ok()) << same.status().message();
  auto lower = driver->client->SetGate(2);
  ASSERT_FALSE(lower.ok());
  EXPECT_EQ(lower.status().message(),
            "server 0 (" + service_->endpoint() +
                ") refused a request: GATE 2 is below the current gate 3 (a step gate only "
                "rises)");
  auto stats = driver->client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].bad_messages(), 1);
  ASSERT_TRUE(driver->client->Shutdown().ok());
  thread_.join();
}

TEST_F(StepGateTest, AShardWithoutTheFlagRefusesGate) {
  StartService(Config(ConsistencyMode::kBsp, 1));
  auto driver = Connect(0, 1, ConsistencyMode::kBsp, false);
  ASSERT_TRUE(driver);
  auto refused = driver->client->SetGate(1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "server 0 (" + service_->endpoint() +
                ") refused a request: this shard has no step gate (start ps-server with "
                "--step-gate)");
  ASSERT_TRUE(driver->client->Shutdown().ok());
  thread_.join();
}

TEST_F(StepGateTest, BadGateMessagesAreDroppedByTheValidator) {
  server::ShardConfig config = Config(ConsistencyMode::kBsp, 1);
  config.step_gate = true;
  StartService(config);
  auto stranger = transport::ConnectDealer(context_, service_->endpoint());
  ASSERT_TRUE(stranger.ok()) << stranger.status().message();
  transport::Origin wrong_key{pstrain::CONTROL, 0, kJobKey + 1};
  transport::Origin unknown_worker{pstrain::WORKER, 5, kJobKey};
  ASSERT_TRUE((*stranger)->Send("", {transport::GateHeader(wrong_key, 9), {}}).ok());
  ASSERT_TRUE((*stranger)->Send("", {transport::GateHeader(unknown_worker, 9), {}}).ok());
  ASSERT_TRUE(
      (*stranger)->Send("", {transport::NewHeader({pstrain::CONTROL, 0, kJobKey}, pstrain::GATE), {}})
          .ok());
  EXPECT_TRUE(LogAppears("dropped GATE from control 0", ": job key mismatch"));
  EXPECT_TRUE(LogAppears("dropped GATE from worker 5", ": worker 5 is not in this job (1 workers)"));
  EXPECT_TRUE(LogAppears("dropped GATE from control 0", ": GATE has no clock"));
  // None opened the gate: a worker's pull for 0 still waits for it.
  auto worker = Connect(0, 1, ConsistencyMode::kBsp, true);
  ASSERT_TRUE(worker);
  ASSERT_TRUE(worker->client->InitPush().ok());
  auto driver = Connect(0, 1, ConsistencyMode::kBsp, false);
  ASSERT_TRUE(driver);
  PendingPull pull(*worker, 0);
  EXPECT_TRUE(WaitsAtGate(0, 0, 0));
  EXPECT_FALSE(pull.done());
  auto stats = driver->client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].bad_messages(), 3);
  ASSERT_TRUE(driver->client->SetGate(1).ok());
  EXPECT_EQ(pull.Join(), 0);
  // A control client's pull is answered at once with the shard's current
  // weights (DistributedSolver's net), past the gate and whatever the clocks.
  ASSERT_TRUE(driver->client->Pull(7).ok());
  int64_t version = -1;
  ASSERT_TRUE(driver->client->WaitPull(&version, nullptr).ok());
  EXPECT_EQ(version, 0);
  ASSERT_TRUE(driver->client->Shutdown().ok());
  thread_.join();
}

TEST(StepGateValidateTest, GateKindsAndTheirFields) {
  transport::ValidationRules server_rules;
  server_rules.receiver = pstrain::SERVER;
  server_rules.job_key = kJobKey;
  transport::InMessage gate;
  gate.header = transport::NewHeader({pstrain::WORKER, 0, kJobKey}, pstrain::GATE);
  EXPECT_EQ(transport::Validate(gate, server_rules).message(), "GATE has no clock");
  transport::InMessage checkpoint_push;
  checkpoint_push.header = transport::NewHeader({pstrain::WORKER, 0, kJobKey}, pstrain::PULL);
  checkpoint_push.header.set_clock(1);
  checkpoint_push.header.set_gate_checkpoint(true);
  EXPECT_EQ(transport::Validate(checkpoint_push, server_rules).message(),
            "gate_checkpoint in a PULL");
  gate.header.set_clock(4);
  EXPECT_TRUE(transport::Validate(gate, server_rules).ok());
  transport::ValidationRules no_key = server_rules;
  no_key.job_key = 0;
  EXPECT_EQ(transport::Validate(gate, no_key).message(),
            "GATE from an unauthenticated peer (this server has neither CURVE keys nor a job key)");
  transport::ValidationRules worker_rules;
  worker_rules.receiver = pstrain::WORKER;
  EXPECT_EQ(transport::Validate(gate, worker_rules).message(), "a worker does not accept GATE");
  transport::InMessage ack;
  ack.header = transport::ReplyHeader({pstrain::SERVER, 0, 0}, gate.header, pstrain::GATE_ACK);
  EXPECT_EQ(transport::Validate(ack, worker_rules).message(), "GATE_ACK has no version");
  ack.header.set_version(2);
  EXPECT_TRUE(transport::Validate(ack, worker_rules).ok());
  EXPECT_EQ(transport::Validate(ack, server_rules).message(), "job key mismatch");
  ack.header.set_job_key(kJobKey);
  EXPECT_EQ(transport::Validate(ack, server_rules).message(),
            "a server does not accept GATE_ACK");
}

TEST(StepGateShardTest, TheGateStartsAtTheResumedClockAndWrapsEveryBase) {
  for (ConsistencyMode mode :
       {ConsistencyMode::kBsp, ConsistencyMode::kSsp, ConsistencyMode::kAsp}) {
    server::ShardConfig c = Config(mode, 2, 1);
    c.step_gate = true;
    const std::vector<std::string> names = server::ShardState(c).policy_names();
    ASSERT_EQ(names.size(), 2u);
    EXPECT_EQ(names[1], "step_gate");
  }
  server::ShardConfig elastic = Config(ConsistencyMode::kSsp, 2, 1);
  elastic.methods.elastic = true;
  elastic.step_gate = true;
  EXPECT_EQ(server::ShardState(elastic).policy_names(),
            (std::vector<std::string>{"elastic", "step_gate"}));

  Shard before(Config(ConsistencyMode::kBsp, 1));
  (void)before.Send(Hello(0, 1));
  (void)before.Send(Init(0, 1));
  for (int64_t t = 0; t < 2; ++t) (void)before.Send(Push(0, t, {0, 1, 2}));
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("pstrain_step_gate_" + std::to_string(getpid()) + ".state"))
                               .string();
  ASSERT_TRUE(before.server.WriteCheckpoint(path).ok());
  server::ShardConfig gated = Config(ConsistencyMode::kBsp, 1);
  gated.step_gate = true;
  auto restored = server::ShardState::Restore(gated, path);
  std::filesystem::remove(path);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  EXPECT_EQ(restored->gate(), 2);
  auto handle = [&](Message m) { return restored->Handle(m.get(), kT0); };
  (void)handle(Hello(0, 1));
  EXPECT_TRUE(handle(Pull(0, 2)).empty());  // waits at the resumed clock
  Message gate(pstrain::GATE, 0, 3);
  auto out = handle(std::move(gate));
  ASSERT_EQ(out.size(), 2u);  // GATE_ACK, then the pull it opened
  EXPECT_EQ(out[0].header.type(), pstrain::GATE_ACK);
  EXPECT_EQ(out[0].header.clock(), 2);    // the slowest worker's clock
  EXPECT_EQ(out[0].header.version(), 2);
  EXPECT_EQ(out[1].header.type(), pstrain::PULL_REPLY);
  EXPECT_EQ(out[1].header.clock(), 2);
  EXPECT_EQ(out[1].header.chunks_size(), 3);
}

TEST(StepGateShardTest, ACheckpointBarrierPullWaitsForTheGateToo) {
  server::ShardConfig c = Config(ConsistencyMode::kSsp, 1, 1);
  c.step_gate = true;
  c.snapshot_interval = 2;
  c.snapshot_prefix = (std::filesystem::temp_directory_path() /
                       ("pstrain_step_gate_cut_" + std::to_string(getpid())))
                          .string();
  Shard shard(c);
  (void)shard.Send(Hello(0, 1));
  (void)shard.Send(Init(0, 1));
  Message open(pstrain::GATE, 0, 2);
  ASSERT_EQ(shard.Send(std::move(open)).size(), 1u);
  for (int64_t t = 0; t < 2; ++t) (void)shard.Send(Push(0, t, {0, 1, 2}));
  // Every clock is at the cut 2, so the barrier alone would answer (and cut) now.
  EXPECT_TRUE(shard.Send(Pull(0, 2)).empty());
  Message raise(pstrain::GATE, 0, 3);
  auto out = shard.Send(std::move(raise));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].header.type(), pstrain::PULL_REPLY);
  const std::string file = c.snapshot_prefix + "_iter_2.shard0.state";
  EXPECT_EQ(out[1].header.text(), file);
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace pstrain

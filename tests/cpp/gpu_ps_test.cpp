// The parameter-server GPU paths with real processes on 127.0.0.1:
//  - ps-server --device gpu:0 as a program: hand-computed SGD-with-momentum
//    steps applied on the device, pulled back exactly, and a clean exit.
//  - PsWorker on the GPU engine (device gradients copied to pinned memory
//    per layer, pushed as each copy completes) against a real ps-server
//    shard, on the CPU and on the GPU: after the run, worker 0's
//    .caffemodel equals the CPU worker's against a CPU shard within float
//    tolerance.
// Every wait is bounded; server processes are killed and reaped on failure.
// Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/device.hpp"
#include "common/transport/channel.hpp"
#include "common/transport/context.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/gpu_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "tests/cpp/transport_test_util.hpp"
#include "worker/ps/ps_worker.hpp"

namespace pstrain::testing {
namespace {

using transport::InMessage;
using transport::OutMessage;
using transport::Payload;

constexpr uint64_t kJobKey = 4242;

pstrain::Header WorkerHeader(pstrain::MessageType type) { return WorkerZeroHeader(type, kJobKey); }

std::optional<InMessage> Expect(transport::Channel& channel, pstrain::MessageType type) {
  return ExpectMessage(channel, type, std::chrono::seconds(30));
}

OutMessage Push(int64_t clock, std::vector<float> grad) {
  OutMessage push{WorkerHeader(pstrain::PUSH), {}};
  push.header.set_clock(clock);
  auto* ref = push.header.add_chunks();
  ref->set_id(0);
  ref->set_length(static_cast<int64_t>(grad.size()));
  push.payloads.push_back(Payload::Of(std::make_shared<std::vector<float>>(std::move(grad))));
  return push;
}

std::vector<float> PullWeights(transport::Channel& channel, int64_t clock) {
  OutMessage pull{WorkerHeader(pstrain::PULL), {}};
  pull.header.set_clock(clock);
  EXPECT_TRUE(channel.Send("", std::move(pull)).ok());
  auto reply = Expect(channel, pstrain::PULL_REPLY);
  if (!reply || reply->payload_count() != 1) return {};
  return std::vector<float>(reply->payload(0), reply->payload(0) + 4);
}

TEST(GpuPsServerProcessTest, AppliesMomentumStepsOnTheDevice) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  TempDir dir;
  WriteTextFile(dir / "solver.prototxt",
                "base_lr: 0.5\nmomentum: 0.9\nlr_policy: \"fixed\"\nmax_iter: 10\n"
                "snapshot_after_train: false\nnet: \"unused\"\n");
  ServerProcess server({"--solver", dir / "solver.prototxt", "--workers", "1", "--job-key",
                        std::to_string(kJobKey), "--device", "gpu:0", "--idle-exit-s", "60"});
  ASSERT_TRUE(server.started());
  EXPECT_NE(server.first_line().find("\"device\":\"gpu:0\""), std::string::npos)
      << server.first_line();
  transport::Context context;
  auto dealer = transport::ConnectDealer(context, server.endpoint());
  ASSERT_TRUE(dealer.ok()) << dealer.status().message();
  transport::Channel& channel = *dealer.value();

  OutMessage hello{WorkerHeader(pstrain::HELLO), {}};
  hello.header.set_world_size(1);
  ASSERT_TRUE(channel.Send("", std::move(hello)).ok());
  ASSERT_TRUE(Expect(channel, pstrain::HELLO_ACK));
  std::vector<float> w = {1.f, -2.f, 3.f, 0.25f};
  ASSERT_TRUE(channel.Send("", OneChunkInitPush(WorkerHeader(pstrain::INIT_PUSH), "w", w)).ok());
  ASSERT_TRUE(Expect(channel, pstrain::INIT_ACK));
  EXPECT_EQ(PullWeights(channel, 0), w);

  // Caffe's SGD: h = lr * g + momentum * h; w -= h (float arithmetic, as the
  // device kernel does it without fused multiply-adds).
  std::vector<float> h(4, 0.f);
  const std::vector<std::vector<float>> grads = {{1.f, 2.f, -1.f, 0.5f}, {0.5f, -1.f, 4.f, 1.f}};
  for (int64_t clock = 0; clock < 2; ++clock) {
    const std::vector<float>& g = grads[static_cast<size_t>(clock)];
    for (size_t i = 0; i < 4; ++i) {
      const float lr_g = 0.5f * g[i];
      const float mom_h = 0.9f * h[i];
      h[i] = lr_g + mom_h;
      w[i] = w[i] - h[i];
    }
    ASSERT_TRUE(channel.Send("", Push(clock, g)).ok());
    ASSERT_TRUE(Expect(channel, pstrain::PUSH_ACK));
    const std::vector<float> got = PullWeights(channel, clock + 1);
    ASSERT_EQ(got.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], w[i]) << "step " << clock << " [" << i << "]";
  }

  ASSERT_TRUE(channel.Send("", OutMessage{WorkerHeader(pstrain::SHUTDOWN), {}}).ok());
  ASSERT_TRUE(Expect(channel, pstrain::SHUTDOWN));
  EXPECT_EQ(server.Wait(30), 0) << server.rest();
  EXPECT_NE(server.rest().find("\"event\":\"done\""), std::string::npos) << server.rest();
}

// Trains the LMDB classifier for 4 bsp iterations with one worker in this
// process (engine `engine`) against a ps-server process on `device`; returns
// worker 0's final .caffemodel blobs.
std::vector<std::vector<float>> TrainAgainstServer(Engine engine, const std::string& device) {
  TempDir dir;
  const std::string solver = WriteLmdbClassifier(
      dir.path(), "base_lr: 0.1\nmomentum: 0.9\nweight_decay: 0.001\nmax_iter: 4\n");
  ServerProcess server({"--solver", solver, "--workers", "1", "--job-key", std::to_string(kJobKey),
                        "--device", device, "--idle-exit-s", "60"});
  EXPECT_TRUE(server.started());
  if (!server.started()) return {};
  PsWorkerOptions options;
  options.solver_path = solver;
  options.client.servers = {server.endpoint()};
  options.client.job_key = kJobKey;
  options.client.timeout = std::chrono::seconds(60);
  options.engine = engine;
  transport::Context context;
  {
    auto worker = PsWorker::Create(context, options);
    EXPECT_TRUE(worker.ok()) << worker.status().message();
    if (!worker.ok()) return {};
    const Status ran = worker.value()->Run();
    EXPECT_TRUE(ran.ok()) << ran.message();
  }
  EXPECT_EQ(server.Wait(30), 0) << server.rest();
  return CaffemodelBlobs(dir / "snap_iter_4.caffemodel");
}

TEST(GpuPsWorkerTest, GpuWorkerTrainsAsTheCpuWorker) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  ASSERT_TRUE(UseCudaDevice(0, "gpu test").ok());
  const auto cpu = TrainAgainstServer(Engine::kFast, "cpu");
  ASSERT_EQ(cpu.size(), 4u);  // ip1 weight and bias, ip2 weight and bias
  const auto gpu_worker = TrainAgainstServer(Engine::kGpu, "cpu");
  ExpectAllNear(cpu, gpu_worker, 2e-4f, "GPU worker, CPU shard");
  const auto all_gpu = TrainAgainstServer(Engine::kGpu, "gpu:0");
  ExpectAllNear(cpu, all_gpu, 2e-4f, "GPU worker, GPU shard");
  // The weights moved: the comparison is not between two initialisations.
  TempDir dir;
  auto fresh = Trainer::FromFile(WriteLmdbClassifier(dir.path(), "base_lr: 0.1\n"), {});
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  EXPECT_NE(ParamValues(fresh.value()->net())[0], cpu[0]);
}

}  // namespace
}  // namespace pstrain::testing

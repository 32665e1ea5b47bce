// GPU IPC pushes end to end (worker/ps/gpu_region.hpp, server/gpu_ipc_reader.hpp):
// a PsWorker on the GPU engine in this process against a ps-server process
// on gpu:0 (another process: CUDA IPC handles do not open in the process that
// made them), bsp, 4 iterations of the LMDB classifier, once with
// --gpu-ipc true and once with false. The final .caffemodels are equal bit
// for bit; the IPC run's shard read every push from the region (its STATS
// gpu_ipc_pushes, in worker 0's server_stats event, at least one an
// iteration, and the worker said the path was on), the socket run's read
// none. A CPU shard refuses the offer and the worker falls back, saying why.
// Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "common/device.hpp"
#include "common/transport/context.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/gpu_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/ps/ps_worker.hpp"

namespace pstrain::testing {
namespace {

constexpr uint64_t kJobKey = 4343;

struct IpcRun {
  std::vector<std::vector<float>> blobs;  // worker 0's final .caffemodel
  double gpu_ipc_pushes = -1;             // the shard's count (server_stats event)
  std::vector<std::string> notices;
};

IpcRun TrainWithGpuIpc(transport::GpuIpcSwitch gpu_ipc) {
  IpcRun run;
  TempDir dir;
  const std::string solver = WriteLmdbClassifier(
      dir.path(), "base_lr: 0.1\nmomentum: 0.9\nweight_decay: 0.001\nmax_iter: 4\n");
  ServerProcess server({"--solver", solver, "--workers", "1", "--job-key", std::to_string(kJobKey),
                        "--device", "gpu:0", "--idle-exit-s", "60"});
  EXPECT_TRUE(server.started());
  if (!server.started()) return run;
  PsWorkerOptions options;
  options.solver_path = solver;
  options.client.servers = {server.endpoint()};
  options.client.job_key = kJobKey;
  options.client.timeout = std::chrono::seconds(60);
  options.client.gpu_ipc = gpu_ipc;
  options.engine = Engine::kGpu;
  options.on_notice = [&](char, const std::string& text) { run.notices.push_back(text); };
  options.on_event = [&](const TrainEvent& e) {
    if (e.kind != "server_stats") return;
    for (const auto& [name, value] : e.values) {
      if (name == "gpu_ipc_pushes") run.gpu_ipc_pushes = value;
    }
  };
  transport::Context context;
  {
    auto worker = PsWorker::Create(context, options);
    EXPECT_TRUE(worker.ok()) << worker.status().message();
    if (!worker.ok()) return run;
    const Status ran = worker.value()->Run();
    EXPECT_TRUE(ran.ok()) << ran.message();
  }
  EXPECT_EQ(server.Wait(30), 0) << server.rest();
  run.blobs = CaffemodelBlobs(dir / "snap_iter_4.caffemodel");
  return run;
}

bool Said(const IpcRun& run, const std::string& text) {
  for (const std::string& line : run.notices) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(GpuIpcTest, IpcPushesTrainBitForBitAsTheSocketPath) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  ASSERT_TRUE(UseCudaDevice(0, "gpu test").ok());
  const IpcRun socket = TrainWithGpuIpc(transport::GpuIpcSwitch::kOff);
  const IpcRun ipc = TrainWithGpuIpc(transport::GpuIpcSwitch::kOn);
  ASSERT_EQ(socket.blobs.size(), 4u);  // ip1 weight and bias, ip2 weight and bias
  ASSERT_EQ(ipc.blobs.size(), 4u);
  for (size_t b = 0; b < 4; ++b) EXPECT_EQ(socket.blobs[b], ipc.blobs[b]) << "blob " << b;
  // The IPC path ran: the worker took it and the shard read pushes from the
  // region, at least one an iteration (the worker pushes per layer).
  EXPECT_TRUE(Said(ipc, "GPU IPC pushes on")) << ::testing::PrintToString(ipc.notices);
  EXPECT_GE(ipc.gpu_ipc_pushes, 4);
  EXPECT_EQ(socket.gpu_ipc_pushes, 0);
  EXPECT_TRUE(Said(socket,
                   "GPU IPC pushes off, gradients go through the socket: "
                   "transport.gpu_ipc is false"))
      << ::testing::PrintToString(socket.notices);
  // The weights moved: not two initialisations compared.
  TempDir dir;
  auto fresh = Trainer::FromFile(WriteLmdbClassifier(dir.path(), "base_lr: 0.1\n"), {});
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  EXPECT_NE(ParamValues(fresh.value()->net())[0], ipc.blobs[0]);
}

TEST(GpuIpcTest, ACpuShardRefusesAndTheWorkerFallsBackToTheSocket) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  ASSERT_TRUE(UseCudaDevice(0, "gpu test").ok());
  TempDir dir;
  const std::string solver = WriteLmdbClassifier(dir.path(), "base_lr: 0.1\nmax_iter: 2\n");
  ServerProcess server({"--solver", solver, "--workers", "1", "--job-key", std::to_string(kJobKey),
                        "--device", "cpu", "--idle-exit-s", "60"});
  ASSERT_TRUE(server.started());
  PsWorkerOptions options;
  options.solver_path = solver;
  options.client.servers = {server.endpoint()};
  options.client.job_key = kJobKey;
  options.client.timeout = std::chrono::seconds(60);
  options.engine = Engine::kGpu;
  std::vector<std::string> notices;
  options.on_notice = [&](char, const std::string& text) { notices.push_back(text); };
  transport::Context context;
  {
    auto worker = PsWorker::Create(context, options);
    ASSERT_TRUE(worker.ok()) << worker.status().message();
    const Status ran = worker.value()->Run();
    EXPECT_TRUE(ran.ok()) << ran.message();
  }
  EXPECT_EQ(server.Wait(30), 0) << server.rest();
  const std::string expected =
      "GPU IPC pushes off, gradients go through the socket: server 0 refused GPU IPC pushes: "
      "shard 0 keeps its chunks on the CPU (--device cpu)";
  EXPECT_NE(std::find(notices.begin(), notices.end(), expected), notices.end())
      << ::testing::PrintToString(notices);
}

}  // namespace
}  // namespace pstrain::testing

// The device flags of the programs and the server's device parsing, on
// whatever machine runs the tests: ps-server --device, ps-worker --gpu and
// ps-net --gpu fail with one clear line and exit 1 in builds without CUDA or
// without the device asked for (these tests run everywhere; the expected
// message depends on BuiltWithCuda() and CudaDeviceCount()).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/device.hpp"
#include "server/device_chunks.hpp"
#include "server/shard_config.hpp"
#include "program_path.hpp"

namespace pstrain {
namespace {

const std::string kBin = ProgramDir() + "/";

struct Ran {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Ran RunShell(const std::string& command) {
  Ran r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buffer{};
  size_t got = 0;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    r.output.append(buffer.data(), got);
  }
  const int status = ::pclose(pipe);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

// What a program must say when asked for CUDA device `device` (as `what`),
// or "" when that device exists here (nothing to check).
std::string ExpectedDeviceError(int device, const std::string& what) {
  if (!BuiltWithCuda()) return what + " needs a CUDA build";
  if (device < CudaDeviceCount()) return "";
  const Status s = CheckCudaDevice(device, what);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("no CUDA device " + std::to_string(device) + " (", 0), 0u)
      << s.message();
  return s.message();
}

class GpuFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pstrain_gpu_flags_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    solver_ = (dir_ / "solver.prototxt").string();
    std::ofstream(solver_) << "net: \"" << (dir_ / "none.prototxt").string()
                           << "\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\nmax_iter: 1\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string solver_;
};

TEST_F(GpuFlagsTest, ParseServerDevice) {
  EXPECT_EQ(server::ParseServerDevice("cpu").value(), -1);
  EXPECT_EQ(server::ParseServerDevice("gpu:0").value(), 0);
  EXPECT_EQ(server::ParseServerDevice("gpu:12").value(), 12);
  for (const char* bad : {"gpu", "gpu:", "gpu:x", "gpu:-1", "cuda:0", "GPU:0", "gpu:123456"}) {
    auto r = server::ParseServerDevice(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), "--device '" + std::string(bad) + "' is not cpu or gpu:N");
  }
}

TEST_F(GpuFlagsTest, ShardConfigChecksTheDevice) {
  server::ShardConfig config;
  config.hyper.base_lr = 0.01f;
  config.device = -2;
  EXPECT_EQ(server::ValidateShardConfig(config).message(),
            "device must be -1 (cpu) or a CUDA device number, got -2");
  config.device = 7;
  const std::string expected = ExpectedDeviceError(7, "gpu:7");
  if (expected.empty()) GTEST_SKIP() << "CUDA device 7 exists here";
  EXPECT_EQ(server::ValidateShardConfig(config).message(), expected);
}

TEST_F(GpuFlagsTest, PsServerDevice) {
  for (int device : {0, 7}) {
    const std::string expected = ExpectedDeviceError(device, "gpu:" + std::to_string(device));
    if (expected.empty()) continue;
    const Ran r = RunShell(kBin + "ps-server --solver " + solver_ + " --device gpu:" +
                           std::to_string(device));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output, "ps-server 0: " + expected + "\n");
  }
  const Ran r = RunShell(kBin + "ps-server --solver " + solver_ + " --device tpu:0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "ps-server 0: --device 'tpu:0' is not cpu or gpu:N\n");
}

TEST_F(GpuFlagsTest, PsWorkerGpu) {
  for (int device : {0, 7}) {
    const std::string expected = ExpectedDeviceError(device, "--gpu " + std::to_string(device));
    if (expected.empty()) continue;
    const Ran r = RunShell(kBin + "ps-worker --solver " + solver_ +
                           " --servers tcp://127.0.0.1:1 --gpu " + std::to_string(device));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output, "ps-worker 0: " + expected + "\n");
  }
}

TEST_F(GpuFlagsTest, PsNetGpu) {
  for (int device : {0, 7}) {
    const std::string expected = ExpectedDeviceError(device, "--gpu " + std::to_string(device));
    if (expected.empty()) continue;
    const Ran r = RunShell(kBin + "ps-net time --model " + solver_ + " --gpu " +
                           std::to_string(device));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output, "ps-net: " + expected + "\n");
  }
}

}  // namespace
}  // namespace pstrain

// common/device.hpp on whatever machine runs the tests: the summary states the
// device count (or why there is none) in its exact words, CheckCudaDevice and
// UseCudaDevice accept exactly the devices that exist, and with a GPU the count
// agrees with the driver's own list (nvidia-smi -L).
#include "common/device.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace pstrain {
namespace {

// What DeviceSummary() must say for `n` devices (n > 0).
std::string CountSummary(int n) {
  return std::to_string(n) + (n == 1 ? " CUDA device" : " CUDA devices");
}

TEST(DeviceTest, SummaryStatesTheCountOrWhyThereIsNone) {
  const int n = CudaDeviceCount();
  const std::string summary = DeviceSummary();
#ifdef PSTRAIN_HAVE_CUDA
  EXPECT_TRUE(BuiltWithCuda());
#else
  EXPECT_FALSE(BuiltWithCuda());
  EXPECT_EQ(n, 0);
  EXPECT_EQ(summary, "no CUDA device (built without CUDA)");
#endif
  if (n > 0) {
    EXPECT_EQ(summary, CountSummary(n));
  } else {
    EXPECT_EQ(n, 0);
    const std::string prefix = "no CUDA device (";
    ASSERT_GT(summary.size(), prefix.size() + 1) << summary;  // a reason in the parentheses
    EXPECT_EQ(summary.substr(0, prefix.size()), prefix) << summary;
    EXPECT_EQ(summary.back(), ')') << summary;
  }
  EXPECT_EQ(CudaDeviceCount(), n);  // asked again, the same
}

TEST(DeviceTest, CheckAcceptsExactlyTheDevicesThatExist) {
  const int n = CudaDeviceCount();
  if (!BuiltWithCuda()) {
    EXPECT_EQ(CheckCudaDevice(0, "--gpu 0").message(), "--gpu 0 needs a CUDA build");
    EXPECT_EQ(UseCudaDevice(0, "--device gpu:0").message(), "--device gpu:0 needs a CUDA build");
    EXPECT_TRUE(FinishGpuWork("device test").ok());
    return;
  }
  if (n == 0) {
    // The reason is the one the summary gives.
    const std::string summary = DeviceSummary();
    EXPECT_EQ(CheckCudaDevice(0, "--gpu 0").message(),
              "no CUDA device 0 " + summary.substr(std::string("no CUDA device ").size()));
    return;
  }
  const std::string visible = std::to_string(n) + (n == 1 ? " device" : " devices") + " visible";
  for (int d = 0; d < n; ++d) EXPECT_TRUE(CheckCudaDevice(d, "--gpu").ok()) << d;
  EXPECT_EQ(CheckCudaDevice(n, "--gpu").message(),
            "no CUDA device " + std::to_string(n) + " (" + visible + ")");
  EXPECT_EQ(CheckCudaDevice(-1, "--gpu").message(), "no CUDA device -1 (" + visible + ")");
}

// Lines of `nvidia-smi -L` ("GPU 0: ..."), or -1 when it cannot be run.
int NvidiaSmiGpus() {
  FILE* pipe = ::popen("nvidia-smi -L 2>/dev/null", "r");
  if (pipe == nullptr) return -1;
  std::array<char, 512> line{};
  int gpus = 0;
  while (std::fgets(line.data(), static_cast<int>(line.size()), pipe) != nullptr) {
    gpus += std::string(line.data()).rfind("GPU ", 0) == 0;
  }
  return ::pclose(pipe) == 0 ? gpus : -1;
}

TEST(DeviceTest, GpuCountAgreesWithTheDriver) {
  const int n = CudaDeviceCount();
  if (n == 0) GTEST_SKIP() << "no GPU here: " << DeviceSummary();
  ASSERT_TRUE(UseCudaDevice(n - 1, "device test").ok());
  SynchronizeGpu();
  EXPECT_TRUE(FinishGpuWork("device test").ok());
  ASSERT_TRUE(UseCudaDevice(0, "device test").ok());
  const int listed = NvidiaSmiGpus();
  if (listed < 0) GTEST_SKIP() << "nvidia-smi -L does not run here";
  // CUDA_VISIBLE_DEVICES hides devices from CUDA, not from nvidia-smi.
  if (std::getenv("CUDA_VISIBLE_DEVICES") == nullptr) {
    EXPECT_EQ(n, listed);
  } else {
    EXPECT_LE(n, listed);
  }
}

}  // namespace
}  // namespace pstrain

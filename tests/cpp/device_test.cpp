#include <gtest/gtest.h>

#include "common/device.hpp"

namespace pstrain {
namespace {

TEST(DeviceTest, SummaryMatchesCount) {
  const int n = CudaDeviceCount();
  EXPECT_GE(n, 0);
  const std::string summary = DeviceSummary();
  if (n == 0) {
    EXPECT_EQ(summary.rfind("no CUDA device (", 0), 0u) << summary;
  } else {
    EXPECT_NE(summary.find("CUDA device"), std::string::npos) << summary;
  }
#ifdef PSTRAIN_HAVE_CUDA
  EXPECT_TRUE(BuiltWithCuda());
#else
  EXPECT_FALSE(BuiltWithCuda());
  EXPECT_EQ(summary, "no CUDA device (built without CUDA)");
#endif
}

TEST(DeviceTest, GpuPresent) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no GPU here: " << DeviceSummary();
  EXPECT_TRUE(BuiltWithCuda());
}

}  // namespace
}  // namespace pstrain

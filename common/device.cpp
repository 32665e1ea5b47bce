#include "common/device.hpp"

namespace pstrain {

#ifdef PSTRAIN_HAVE_CUDA
int CudaDeviceCountImpl(std::string* why);  // common/cuda/device.cu
bool BuiltWithCuda() { return true; }
#else
static int CudaDeviceCountImpl(std::string* why) {
  *why = "built without CUDA";
  return 0;
}
bool BuiltWithCuda() { return false; }
#endif

int CudaDeviceCount() {
  std::string why;
  return CudaDeviceCountImpl(&why);
}

std::string DeviceSummary() {
  std::string why;
  const int n = CudaDeviceCountImpl(&why);
  if (n == 0) return "no CUDA device (" + why + ")";
  return std::to_string(n) + " CUDA device" + (n == 1 ? "" : "s");
}

}  // namespace pstrain

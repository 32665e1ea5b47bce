#include "common/device.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include "common/cuda/gpu_context.hpp"
#endif

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

Status CheckCudaDevice(int device, const std::string& what) {
  if (!BuiltWithCuda()) return Status::FailedPrecondition(what + " needs a CUDA build");
  std::string why;
  const int n = CudaDeviceCountImpl(&why);
  if (device >= 0 && device < n) return Status::Ok();
  if (n > 0) why = std::to_string(n) + " device" + (n == 1 ? "" : "s") + " visible";
  return Status::FailedPrecondition("no CUDA device " + std::to_string(device) + " (" + why + ")");
}

Status UseCudaDevice(int device, const std::string& what) {
  PSTRAIN_RETURN_IF_ERROR(CheckCudaDevice(device, what));
#ifdef PSTRAIN_HAVE_CUDA
  return GpuContext::ForThisThread().SelectDevice(device);
#else
  return Status::Ok();  // not reached: CheckCudaDevice fails without CUDA
#endif
}

void SynchronizeGpu() {
#ifdef PSTRAIN_HAVE_CUDA
  GpuContext::ForThisThread().Synchronize();
#endif
}

Status FinishGpuWork([[maybe_unused]] const std::string& what) {
#ifdef PSTRAIN_HAVE_CUDA
  return GpuContext::ForThisThread().Finish(what);
#else
  return Status::Ok();
#endif
}

}  // namespace pstrain

// CUDA runtime queries for common/device.hpp (compiled only with CUDA).
#include <cuda_runtime.h>

#include <string>

namespace pstrain {

int CudaDeviceCountImpl(std::string* why) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    *why = cudaGetErrorString(err);
    return 0;
  }
  if (count == 0) *why = "the CUDA runtime sees no device";
  return count;
}

}  // namespace pstrain

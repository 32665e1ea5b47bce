#include <cstdint>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/math_gpu.hpp"
#include "common/cuda/sum_squares.hpp"

namespace pstrain::optim {
namespace {

// Each block adds the squares of its grid-stride share of x, summed in double
// in shared memory, to *sum with one atomic add.
// REQUIRES: blockDim kCudaThreads is a power of two.
__global__ void SumSquaresKernel(const float* x, int64_t n, double* sum) {
  __shared__ double partial[kCudaThreads];
  double own = 0.0;
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const double v = x[i];
    own += v * v;
  }
  partial[threadIdx.x] = own;
  __syncthreads();
  for (unsigned step = blockDim.x / 2; step > 0; step /= 2) {
    if (threadIdx.x < step) partial[threadIdx.x] += partial[threadIdx.x + step];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, partial[0]);
}

}  // namespace

void AddSumSquaresGpu(const float* x, size_t n, double* device_sum, cudaStream_t stream) {
  if (n == 0) return;
  const auto count = static_cast<int64_t>(n);
  SumSquaresKernel<<<CudaBlocks(count), kCudaThreads, 0, stream>>>(x, count, device_sum);
  PSTRAIN_CUDA_KERNEL_CHECK();
}

}  // namespace pstrain::optim

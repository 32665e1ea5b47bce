// Launch helpers and small kernels shared by the layers' GPU paths (CUDA
// builds only: included by worker/layers/*.cu). Everything runs on the
// calling thread's GpuContext stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/gpu_context.hpp"
#include "common/cuda/math_gpu.hpp"
#include "worker/layers/channel_reduce.hpp"

namespace pstrain {

inline cudaStream_t LayerStream() { return GpuContext::ForThisThread().stream(); }

// Grid-stride loop with a chosen index type: kernels templated on Index
// and launched through LaunchIndexed use 32-bit unsigned arithmetic (cheap
// division and modulo) when the launch's n fits in int32 and the stride
// cannot wrap, int64_t otherwise.
#define PSTRAIN_CUDA_INDEX_LOOP(Index, i, n)                                         \
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<Index>(blockDim.x) * gridDim.x)

// True when indices below n, plus one grid stride, fit 32 bits.
inline bool Fits32BitIndex(int64_t n) { return n <= INT32_MAX; }

// Runs `kernel(args...)` over n items with a grid-stride loop inside the
// kernel (PSTRAIN_CUDA_KERNEL_LOOP); nothing when n <= 0.
template <typename... Params, typename... Args>
void LaunchKernel(int64_t n, void (*kernel)(Params...), Args... args) {
  if (n <= 0) return;
  kernel<<<CudaBlocks(n), kCudaThreads, 0, LayerStream()>>>(args...);
  PSTRAIN_CUDA_CHECK(cudaGetLastError());
}

// LaunchKernel with the 32-bit instance of a kernel when n fits
// (Fits32BitIndex), the 64-bit one otherwise.
template <typename... P32, typename... P64, typename... Args>
void LaunchIndexed(int64_t n, void (*kernel32)(P32...), void (*kernel64)(P64...), Args... args) {
  if (Fits32BitIndex(n)) {
    LaunchKernel(n, kernel32, args...);
  } else {
    LaunchKernel(n, kernel64, args...);
  }
}

// Copies `rows` rows of `width` floats from src (rows `src_stride` floats
// apart) to dst (rows `dst_stride` floats apart): the strided copies of
// Concat and Slice.
void GpuCopyRows(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                 int64_t dst_stride);

// Softmax over the middle axis of an [outer, channels, inner] array, one
// thread per (outer, inner) position, the reference's arithmetic: exp(x - max)
// then divided by the sum. y may alias x.
void GpuSoftmax(int64_t outer, int channels, int64_t inner, const float* x, float* y);
// Its gradient: dx = (dy - sum over classes of dy * y) * y. dx may alias dy.
void GpuSoftmaxBackward(int64_t outer, int channels, int64_t inner, const float* y, const float* dy,
                        float* dx);

// Caffe's ReLU backward: dx = x > 0 ? dy : slope * dy (relu_layer.cu); dx may
// alias dy. Also the gate of a ReLU fused into a BatchNorm (x: its output).
void GpuReluBackward(int64_t n, float slope, const float* x, const float* dy, float* dx);

}  // namespace pstrain

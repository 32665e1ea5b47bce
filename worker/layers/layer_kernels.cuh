// Launch helpers and small kernels shared by the layers' GPU paths (CUDA
// builds only: included by worker/layers/*.cu). Everything runs on the
// calling thread's GpuContext stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/gpu_context.hpp"
#include "common/cuda/math_gpu.hpp"

namespace pstrain {

inline cudaStream_t LayerStream() { return GpuContext::ForThisThread().stream(); }

// Runs `kernel(args...)` over n items with a grid-stride loop inside the
// kernel (PSTRAIN_CUDA_KERNEL_LOOP); nothing when n <= 0.
template <typename... Params, typename... Args>
void LaunchKernel(int64_t n, void (*kernel)(Params...), Args... args) {
  if (n <= 0) return;
  kernel<<<CudaBlocks(n), kCudaThreads, 0, LayerStream()>>>(args...);
  PSTRAIN_CUDA_CHECK(cudaGetLastError());
}

// View of a [outer, dim, inner] array: out[d] = sum over o and i of
// a[(o * dim + d) * inner + i] (times b at the same index when b is not null),
// summed in double; with `accumulate` the sum is added to out[d]. One block
// per d; deterministic.
void GpuChannelSum(int64_t outer, int64_t dim, int64_t inner, const float* a, const float* b,
                   bool accumulate, float* out);

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

}  // namespace pstrain

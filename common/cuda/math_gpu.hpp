// GPU math (CUDA builds only): the routines of common/math_cpu.hpp that the
// layers' .cu files use, on device pointers, plus the elementwise kernels
// they share. Row-major like the CPU side; sizes are element counts.
// Everything is queued on GpuContext::ForThisThread().stream(); only GpuDot
// waits for it (it returns a host value). Pointers may alias where the CPU
// versions allow it (y == a in GpuMul and the like).
//
// Also the launch helpers for .cu files: kCudaThreads threads a block,
// CudaBlocks(n) blocks, and a grid-stride loop:
//   MyKernel<<<CudaBlocks(n), kCudaThreads, 0, stream>>>(n, ...);
//   __global__ void MyKernel(int64_t n, ...) { PSTRAIN_CUDA_KERNEL_LOOP(i, n) { ... } }
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/math_cpu.hpp"  // Trans

namespace pstrain {

constexpr int kCudaThreads = 256;
// Enough blocks to cover n with kCudaThreads threads, capped (the loop strides); at least 1.
inline int CudaBlocks(int64_t n) {
  constexpr int64_t kMaxBlocks = 32768;
  return static_cast<int>(
      std::clamp<int64_t>((n + kCudaThreads - 1) / kCudaThreads, 1, kMaxBlocks));
}

#define PSTRAIN_CUDA_KERNEL_LOOP(i, n)                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// C = alpha * op(A) * op(B) + beta * C, with op(A) MxK, op(B) KxN, C MxN (cuBLAS).
void GpuGemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
             const float* b, float beta, float* c);
// y = alpha * op(A) * x + beta * y, A is MxN.
void GpuGemv(Trans trans_a, int m, int n, float alpha, const float* a, const float* x, float beta,
             float* y);
void GpuAxpy(int64_t n, float alpha, const float* x, float* y);               // y += alpha x
void GpuAxpby(int64_t n, float alpha, const float* x, float beta, float* y);  // y = a x + b y
void GpuScaleCopy(int64_t n, float alpha, const float* x, float* y);          // y = alpha x
void GpuCopy(int64_t n, const float* x, float* y);
void GpuSet(int64_t n, float value, float* x);
float GpuDot(int64_t n, const float* x, const float* y);

// Elementwise: y_i = a_i op b_i.
void GpuSub(int64_t n, const float* a, const float* b, float* y);
void GpuMul(int64_t n, const float* a, const float* b, float* y);
void GpuDiv(int64_t n, const float* a, const float* b, float* y);

}  // namespace pstrain

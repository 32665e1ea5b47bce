// GPU math (CUDA builds only): the routines of common/math_cpu.hpp on device
// pointers, plus the elementwise kernels the layers share. Row-major like the
// CPU side; sizes are element counts. Everything is queued on
// GpuContext::ForThisThread().stream(); only GpuDot and GpuAsum wait for it
// (they return a host value). Pointers may alias where the CPU versions allow
// it (y == a in GpuAdd and the like).
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
  return static_cast<int>(std::clamp<int64_t>((n + kCudaThreads - 1) / kCudaThreads, 1,
                                              kMaxBlocks));
}

#define PSTRAIN_CUDA_KERNEL_LOOP(i, n)                                               \
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
void GpuScale(int64_t n, float alpha, float* x);                              // x *= alpha
void GpuScaleCopy(int64_t n, float alpha, const float* x, float* y);          // y = alpha x
void GpuCopy(int64_t n, const float* x, float* y);
void GpuSet(int64_t n, float value, float* x);
float GpuDot(int64_t n, const float* x, const float* y);
float GpuAsum(int64_t n, const float* x);  // sum |x_i|

// Elementwise: y_i = a_i op b_i, or y_i = f(a_i).
void GpuAdd(int64_t n, const float* a, const float* b, float* y);
void GpuSub(int64_t n, const float* a, const float* b, float* y);
void GpuMul(int64_t n, const float* a, const float* b, float* y);
void GpuDiv(int64_t n, const float* a, const float* b, float* y);
void GpuExp(int64_t n, const float* a, float* y);
void GpuLog(int64_t n, const float* a, float* y);
void GpuAbs(int64_t n, const float* a, float* y);
void GpuSqr(int64_t n, const float* a, float* y);
void GpuSqrt(int64_t n, const float* a, float* y);
void GpuPowx(int64_t n, const float* a, float alpha, float* y);  // y_i = a_i ^ alpha
void GpuAddScalar(int64_t n, float alpha, float* y);             // y_i += alpha

}  // namespace pstrain

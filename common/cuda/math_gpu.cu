#include "common/cuda/cuda_check.hpp"
#include "common/cuda/gpu_context.hpp"
#include "common/cuda/math_gpu.hpp"

namespace pstrain {
namespace {

cudaStream_t Stream() { return GpuContext::ForThisThread().stream(); }
cublasHandle_t Cublas() { return GpuContext::ForThisThread().cublas(); }
cublasOperation_t CublasOp(Trans t) { return t == Trans::kNo ? CUBLAS_OP_N : CUBLAS_OP_T; }

template <typename Op>
__global__ void UnaryKernel(int64_t n, const float* a, float* y, Op op) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = op(a[i]); }
}

template <typename Op>
__global__ void BinaryKernel(int64_t n, const float* a, const float* b, float* y, Op op) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = op(a[i], b[i]); }
}

template <typename Op>
void Unary(int64_t n, const float* a, float* y, Op op) {
  if (n <= 0) return;
  UnaryKernel<<<CudaBlocks(n), kCudaThreads, 0, Stream()>>>(n, a, y, op);
  PSTRAIN_CUDA_KERNEL_CHECK();
}

template <typename Op>
void Binary(int64_t n, const float* a, const float* b, float* y, Op op) {
  if (n <= 0) return;
  BinaryKernel<<<CudaBlocks(n), kCudaThreads, 0, Stream()>>>(n, a, b, y, op);
  PSTRAIN_CUDA_KERNEL_CHECK();
}

struct SubOp {
  __device__ float operator()(float a, float b) const { return a - b; }
};
struct MulOp {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct DivOp {
  __device__ float operator()(float a, float b) const { return a / b; }
};
// y = alpha x + beta y, written as a binary op over (x, y).
struct AxpbyOp {
  float alpha, beta;
  __device__ float operator()(float x, float y) const { return alpha * x + beta * y; }
};
struct ScaleOp {
  float alpha;
  __device__ float operator()(float a) const { return alpha * a; }
};
struct SetOp {
  float value;
  __device__ float operator()(float) const { return value; }
};

}  // namespace

// Row-major C (MxN) is column-major C^T (NxM) = op(B)^T op(A)^T: one cuBLAS
// call with the operands swapped.
void GpuGemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
             const float* b, float beta, float* c) {
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  PSTRAIN_CUBLAS_CHECK(cublasSgemm(Cublas(), CublasOp(trans_b), CublasOp(trans_a), n, m, k, &alpha,
                                   b, ldb, a, lda, &beta, c, n));
}

// Row-major A (MxN) is column-major A^T (NxM, leading dimension N).
void GpuGemv(Trans trans_a, int m, int n, float alpha, const float* a, const float* x, float beta,
             float* y) {
  const cublasOperation_t op = trans_a == Trans::kNo ? CUBLAS_OP_T : CUBLAS_OP_N;
  PSTRAIN_CUBLAS_CHECK(cublasSgemv(Cublas(), op, n, m, &alpha, a, n, x, 1, &beta, y, 1));
}

void GpuAxpy(int64_t n, float alpha, const float* x, float* y) {
  if (n <= 0) return;
  PSTRAIN_CUBLAS_CHECK(cublasSaxpy_64(Cublas(), n, &alpha, x, 1, y, 1));
}

void GpuAxpby(int64_t n, float alpha, const float* x, float beta, float* y) {
  if (beta == 0.f) return GpuScaleCopy(n, alpha, x, y);  // y's old values (even NaN) drop out
  Binary(n, x, y, y, AxpbyOp{alpha, beta});
}

void GpuScaleCopy(int64_t n, float alpha, const float* x, float* y) {
  Unary(n, x, y, ScaleOp{alpha});
}

void GpuCopy(int64_t n, const float* x, float* y) {
  if (n <= 0 || x == y) return;
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, Stream()));
}

void GpuSet(int64_t n, float value, float* x) {
  if (n <= 0) return;
  if (value == 0.f) {
    PSTRAIN_CUDA_CHECK(cudaMemsetAsync(x, 0, n * sizeof(float), Stream()));
  } else {
    Unary(n, x, x, SetOp{value});
  }
}

float GpuDot(int64_t n, const float* x, const float* y) {
  float result = 0.f;
  if (n > 0) PSTRAIN_CUBLAS_CHECK(cublasSdot_64(Cublas(), n, x, 1, y, 1, &result));
  return result;
}

void GpuSub(int64_t n, const float* a, const float* b, float* y) { Binary(n, a, b, y, SubOp{}); }
void GpuMul(int64_t n, const float* a, const float* b, float* y) { Binary(n, a, b, y, MulOp{}); }
void GpuDiv(int64_t n, const float* a, const float* b, float* y) { Binary(n, a, b, y, DivOp{}); }

}  // namespace pstrain

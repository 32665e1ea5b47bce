// CPU math on OpenBLAS: the handful of BLAS-style routines the layers use.
// All pointers are host pointers; sizes are element counts. Row-major.
#pragma once

#include <cstdint>

namespace pstrain {

enum class Trans { kNo, kYes };

// C = alpha * op(A) * op(B) + beta * C, with op(A) MxK, op(B) KxN, C MxN.
void CpuGemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
             const float* b, float beta, float* c);
// y = alpha * op(A) * x + beta * y, A is MxN.
void CpuGemv(Trans trans_a, int m, int n, float alpha, const float* a, const float* x, float beta,
             float* y);
void CpuAxpy(int64_t n, float alpha, const float* x, float* y);           // y += alpha x
void CpuAxpby(int64_t n, float alpha, const float* x, float beta, float* y);  // y = a x + b y
void CpuScale(int64_t n, float alpha, float* x);                        // x *= alpha
void CpuScaleCopy(int64_t n, float alpha, const float* x, float* y);    // y = alpha x
void CpuCopy(int64_t n, const float* x, float* y);
void CpuSet(int64_t n, float value, float* x);
float CpuDot(int64_t n, const float* x, const float* y);
float CpuAsum(int64_t n, const float* x);

// Process-wide CPU thread count for OpenBLAS, OpenMP and oneDNN. Call once at
// start-up, before any layer runs. n <= 0 means "all cores".
void SetCpuThreads(int n);
int CpuThreads();

}  // namespace pstrain

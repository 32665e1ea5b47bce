#include "common/math_cpu.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace pstrain {

static CBLAS_TRANSPOSE ToCblas(Trans t) { return t == Trans::kNo ? CblasNoTrans : CblasTrans; }

void CpuGemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
             const float* b, float beta, float* c) {
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  cblas_sgemm(CblasRowMajor, ToCblas(trans_a), ToCblas(trans_b), m, n, k, alpha, a, lda, b, ldb,
              beta, c, n);
}

void CpuGemv(Trans trans_a, int m, int n, float alpha, const float* a, const float* x, float beta,
             float* y) {
  cblas_sgemv(CblasRowMajor, ToCblas(trans_a), m, n, alpha, a, n, x, 1, beta, y, 1);
}

void CpuAxpy(int64_t n, float alpha, const float* x, float* y) {
  cblas_saxpy(static_cast<int>(n), alpha, x, 1, y, 1);
}

void CpuAxpby(int64_t n, float alpha, const float* x, float beta, float* y) {
  cblas_sscal(static_cast<int>(n), beta, y, 1);
  cblas_saxpy(static_cast<int>(n), alpha, x, 1, y, 1);
}

void CpuScale(int64_t n, float alpha, float* x) { cblas_sscal(static_cast<int>(n), alpha, x, 1); }

void CpuScaleCopy(int64_t n, float alpha, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i];
}

void CpuCopy(int64_t n, const float* x, float* y) {
  if (x != y && n > 0) std::memcpy(y, x, n * sizeof(float));
}

void CpuSet(int64_t n, float value, float* x) {
  if (value == 0.f) {
    if (n > 0) std::memset(x, 0, n * sizeof(float));
    return;
  }
  std::fill(x, x + n, value);
}

float CpuDot(int64_t n, const float* x, const float* y) {
  return cblas_sdot(static_cast<int>(n), x, 1, y, 1);
}

float CpuAsum(int64_t n, const float* x) { return cblas_sasum(static_cast<int>(n), x, 1); }

static int g_cpu_threads = 1;

void SetCpuThreads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  g_cpu_threads = n;
  openblas_set_num_threads(n);
  omp_set_num_threads(n);
}

int CpuThreads() { return g_cpu_threads; }

}  // namespace pstrain

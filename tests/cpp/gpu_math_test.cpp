// math_gpu against math_cpu (and plain loops) on random data. Skipped without
// a CUDA device; compiled only in CUDA builds.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "common/blob.hpp"
#include "common/math_cpu.hpp"
#include "common/rng.hpp"
#include "tests/cpp/layer_test_util.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include "common/cuda/math_gpu.hpp"

namespace pstrain {
namespace {

using testing::ExpectBlobsNear;

std::unique_ptr<Blob> RandomBlob(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  auto blob = std::make_unique<Blob>(std::vector<int>{static_cast<int>(n)});
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) blob->mutable_cpu_data()[i] = rng.Uniform(lo, hi);
  return blob;
}

std::vector<float> Values(const Blob& blob) {
  return std::vector<float>(blob.cpu_data(), blob.cpu_data() + blob.count());
}

TEST(GpuMathTest, GemmAllTransposes) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const int m = 7, n = 5, k = 9;
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      auto a = RandomBlob(m * k, 1), b = RandomBlob(k * n, 2), c = RandomBlob(m * n, 3);
      std::vector<float> expected = Values(*c);
      CpuGemm(ta, tb, m, n, k, 1.5f, a->cpu_data(), b->cpu_data(), 0.5f, expected.data());
      GpuGemm(ta, tb, m, n, k, 1.5f, a->gpu_data(), b->gpu_data(), 0.5f, c->mutable_gpu_data());
      ExpectBlobsNear(
          expected.data(), c->cpu_data(), m * n, 1e-5f,
          "gemm " + std::to_string(static_cast<int>(ta)) + std::to_string(static_cast<int>(tb)));
    }
  }
}

TEST(GpuMathTest, Gemv) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const int m = 6, n = 11;
  for (Trans t : {Trans::kNo, Trans::kYes}) {
    const int xn = t == Trans::kNo ? n : m, yn = t == Trans::kNo ? m : n;
    auto a = RandomBlob(m * n, 4), x = RandomBlob(xn, 5), y = RandomBlob(yn, 6);
    std::vector<float> expected = Values(*y);
    CpuGemv(t, m, n, -0.5f, a->cpu_data(), x->cpu_data(), 2.f, expected.data());
    GpuGemv(t, m, n, -0.5f, a->gpu_data(), x->gpu_data(), 2.f, y->mutable_gpu_data());
    ExpectBlobsNear(expected.data(), y->cpu_data(), yn, 1e-5f, "gemv");
  }
}

TEST(GpuMathTest, BlasLevelOne) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const int64_t n = 100003;  // several blocks and a ragged end
  auto x = RandomBlob(n, 7), y = RandomBlob(n, 8);
  std::vector<float> expected = Values(*y);
  CpuAxpy(n, 0.25f, x->cpu_data(), expected.data());
  GpuAxpy(n, 0.25f, x->gpu_data(), y->mutable_gpu_data());
  ExpectBlobsNear(expected.data(), y->cpu_data(), n, 1e-6f, "axpy");

  CpuAxpby(n, 2.f, x->cpu_data(), -3.f, expected.data());
  GpuAxpby(n, 2.f, x->gpu_data(), -3.f, y->mutable_gpu_data());
  ExpectBlobsNear(expected.data(), y->cpu_data(), n, 1e-6f, "axpby");

  GpuScaleCopy(n, -2.f, x->gpu_data(), y->mutable_gpu_data());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y->cpu_data()[i], -2.f * x->cpu_data()[i]);
  GpuCopy(n, x->gpu_data(), y->mutable_gpu_data());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y->cpu_data()[i], x->cpu_data()[i]);
  GpuSet(n, 0.75f, y->mutable_gpu_data());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y->cpu_data()[i], 0.75f);

  double dot = 0, asum = 0;  // asum scales the tolerance
  for (int64_t i = 0; i < n; ++i) {
    dot += static_cast<double>(x->cpu_data()[i]) * y->cpu_data()[i];
    asum += std::fabs(x->cpu_data()[i]);
  }
  EXPECT_NEAR(GpuDot(n, x->gpu_data(), y->gpu_data()), dot, 1e-4 * std::fabs(asum));
  EXPECT_NEAR(GpuDot(n, x->gpu_data(), y->gpu_data()), CpuDot(n, x->cpu_data(), y->cpu_data()),
              1e-4 * asum);
}

TEST(GpuMathTest, Elementwise) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const int64_t n = 4099;
  auto a = RandomBlob(n, 9, 0.1f, 2.f), b = RandomBlob(n, 10, -2.f, -0.1f);
  auto y = std::make_unique<Blob>(std::vector<int>{static_cast<int>(n)});
  using Binary = void (*)(int64_t, const float*, const float*, float*);
  struct BinaryCase {
    const char* name;
    Binary gpu;
    std::function<double(double, double)> f;
  };
  const BinaryCase binaries[] = {{"sub", GpuSub, [](double p, double q) { return p - q; }},
                                 {"mul", GpuMul, [](double p, double q) { return p * q; }},
                                 {"div", GpuDiv, [](double p, double q) { return p / q; }}};
  std::vector<float> expected(n);
  for (const auto& c : binaries) {
    c.gpu(n, a->gpu_data(), b->gpu_data(), y->mutable_gpu_data());
    for (int64_t i = 0; i < n; ++i) expected[i] = c.f(a->cpu_data()[i], b->cpu_data()[i]);
    ExpectBlobsNear(expected.data(), y->cpu_data(), n, 1e-6f, c.name);
  }
  for (int64_t i = 0; i < n; ++i) expected[i] = a->cpu_data()[i] * b->cpu_data()[i];
  GpuMul(n, a->gpu_data(), b->gpu_data(), a->mutable_gpu_data());  // in place
  ExpectBlobsNear(expected.data(), a->cpu_data(), n, 1e-6f, "mul in place");
}

}  // namespace
}  // namespace pstrain

#endif  // PSTRAIN_HAVE_CUDA

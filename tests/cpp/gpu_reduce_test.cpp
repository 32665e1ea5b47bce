// The GPU per-channel reductions (worker/layers/channel_reduce.hpp) against
// double-precision loops on the host: shapes with one chunk per channel and
// with many (odd sizes, so chunks end mid-row), inner == 1, more channels
// than a grid's y dimension (65535), empty channels; sums, products,
// accumulation, mean and variance; the same bits on a second run. Skipped
// without a CUDA device; compiled only in CUDA builds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/blob.hpp"
#include "common/rng.hpp"
#include "tests/cpp/layer_test_util.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include "common/cuda/gpu_context.hpp"
#include "worker/layers/channel_reduce.hpp"

namespace pstrain {
namespace {

struct View {
  int64_t outer, dim, inner;
};

std::string Name(const View& v) {
  return "[" + std::to_string(v.outer) + ", " + std::to_string(v.dim) + ", " +
         std::to_string(v.inner) + "]";
}

std::unique_ptr<Blob> RandomBlob(int64_t n, uint64_t seed, float mean) {
  auto blob = std::make_unique<Blob>(std::vector<int>{static_cast<int>(std::max<int64_t>(n, 1))});
  Rng rng(seed);
  float* d = blob->mutable_cpu_data();
  for (int64_t i = 0; i < n; ++i) d[i] = mean + rng.Uniform(-1.f, 1.f);
  return blob;
}

// Host reference: per channel, term summed in double.
template <typename Term>
std::vector<double> HostSums(const View& v, Term term) {
  std::vector<double> sums(v.dim, 0.0);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t d = 0; d < v.dim; ++d) {
      for (int64_t i = 0; i < v.inner; ++i) sums[d] += term((o * v.dim + d) * v.inner + i, d);
    }
  }
  return sums;
}

void ExpectClose(const std::vector<double>& expected, const float* got, const std::string& what) {
  for (size_t d = 0; d < expected.size(); ++d) {
    const double tol = 1e-6 * std::max(1.0, std::fabs(expected[d]));
    ASSERT_NEAR(got[d], expected[d], tol) << what << " channel " << d;
  }
}

const std::vector<View>& Views() {
  static const std::vector<View> views = {
      {4, 16, 64},      // one chunk per channel
      {3, 5, 70001},    // several chunks, ending mid-row
      {1, 1, 1000003},  // a loss total: hundreds of chunks
      {33, 7, 1},       // inner 1: a column sum
      {2, 70000, 3},    // more channels than gridDim.y allows
      {32, 64, 3136},   // a ResNet-50 BatchNorm (conv2, batch 32)
  };
  return views;
}

TEST(GpuReduceTest, ChannelSumsMatchDoubleLoops) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  for (const View& v : Views()) {
    const int64_t n = v.outer * v.dim * v.inner;
    auto a = RandomBlob(n, 1, 0.5f), b = RandomBlob(n, 2, -0.25f);
    Blob out(std::vector<int>{static_cast<int>(v.dim)});
    const float* ha = a->cpu_data();
    const float* hb = b->cpu_data();
    GpuChannelSum(v.outer, v.dim, v.inner, a->gpu_data(), nullptr, false, out.mutable_gpu_data());
    ExpectClose(HostSums(v, [&](int64_t i, int64_t) { return static_cast<double>(ha[i]); }),
                out.cpu_data(), "sum " + Name(v));
    GpuChannelSum(v.outer, v.dim, v.inner, a->gpu_data(), b->gpu_data(), false,
                  out.mutable_gpu_data());
    ExpectClose(HostSums(v,
                         [&](int64_t i, int64_t) {
                           return static_cast<double>(ha[i]) * static_cast<double>(hb[i]);
                         }),
                out.cpu_data(), "product " + Name(v));
  }
}

TEST(GpuReduceTest, AccumulateAddsToTheOutput) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const View v{3, 5, 70001};
  auto a = RandomBlob(v.outer * v.dim * v.inner, 3, 0.f);
  Blob out(std::vector<int>{static_cast<int>(v.dim)});
  for (int d = 0; d < v.dim; ++d) out.mutable_cpu_data()[d] = 10.f * static_cast<float>(d);
  const float* ha = a->cpu_data();
  GpuChannelSum(v.outer, v.dim, v.inner, a->gpu_data(), nullptr, true, out.mutable_gpu_data());
  std::vector<double> expected = HostSums(v, [&](int64_t i, int64_t) { return double{ha[i]}; });
  for (int d = 0; d < v.dim; ++d) {
    expected[d] = static_cast<double>(10.f * d + static_cast<float>(expected[d]));
  }
  ExpectClose(expected, out.cpu_data(), "accumulated");
}

// The reference BatchNorm's statistics: mean in double, then the squared
// deviations from that double mean, both divided by outer * inner.
TEST(GpuReduceTest, MeanAndVarianceMatchTwoPassDouble) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  for (const View& v : Views()) {
    const int64_t n = v.outer * v.dim * v.inner;
    auto x = RandomBlob(n, 4, 100.f);  // a large mean: a one-pass formula would lose digits
    Blob mean(std::vector<int>{static_cast<int>(v.dim)});
    Blob var(std::vector<int>{static_cast<int>(v.dim)});
    GpuChannelMeanVariance(v.outer, v.dim, v.inner, x->gpu_data(), mean.mutable_gpu_data(),
                           var.mutable_gpu_data());
    const float* hx = x->cpu_data();
    const double m = static_cast<double>(v.outer * v.inner);
    std::vector<double> mu = HostSums(v, [&](int64_t i, int64_t) { return double{hx[i]}; });
    for (double& s : mu) s /= m;
    std::vector<double> sq = HostSums(v, [&](int64_t i, int64_t d) {
      const double dev = hx[i] - mu[d];
      return dev * dev;
    });
    for (double& s : sq) s /= m;
    ExpectClose(mu, mean.cpu_data(), "mean " + Name(v));
    ExpectClose(sq, var.cpu_data(), "variance " + Name(v));
  }
}

TEST(GpuReduceTest, EmptyChannelsGiveZero) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  Blob x(std::vector<int>{1});
  Blob out(std::vector<int>{4}), mean(std::vector<int>{4}), var(std::vector<int>{4});
  for (Blob* b : {&out, &mean, &var}) {
    for (int d = 0; d < 4; ++d) b->mutable_cpu_data()[d] = 7.f;
  }
  GpuChannelSum(0, 4, 9, x.gpu_data(), nullptr, false, out.mutable_gpu_data());
  GpuChannelMeanVariance(2, 4, 0, x.gpu_data(), mean.mutable_gpu_data(), var.mutable_gpu_data());
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(out.cpu_data()[d], 0.f);
    EXPECT_EQ(mean.cpu_data()[d], 0.f);
    EXPECT_EQ(var.cpu_data()[d], 0.f);
  }
}

TEST(GpuReduceTest, RepeatedRunsGiveTheSameBits) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const View v{1, 3, 2000003};
  auto a = RandomBlob(v.outer * v.dim * v.inner, 5, 0.f);
  Blob first(std::vector<int>{3}), second(std::vector<int>{3});
  GpuChannelSum(v.outer, v.dim, v.inner, a->gpu_data(), nullptr, false, first.mutable_gpu_data());
  GpuChannelSum(v.outer, v.dim, v.inner, a->gpu_data(), nullptr, false, second.mutable_gpu_data());
  for (int d = 0; d < 3; ++d) EXPECT_EQ(first.cpu_data()[d], second.cpu_data()[d]) << d;
}

}  // namespace
}  // namespace pstrain

#endif  // PSTRAIN_HAVE_CUDA

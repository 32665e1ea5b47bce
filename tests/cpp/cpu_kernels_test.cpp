// Tests of the layers' own vectorised CPU kernels (the "vector"
// implementation of Pooling and LRN, worker/layers/*_cpu_kernels.hpp) on
// every ISA variant this CPU runs: Pooling MAX equals the reference bit for
// bit (values, argmax through the mask top, gradients; with ties, -inf and
// NaN), AVE and LRN within rounding, over shapes with odd sizes, padding,
// ceil/floor rounding, dropped last windows, stride > kernel, global pooling
// and many small planes; LRN's finite-difference gradients; the choice of
// implementation by name; and which ISA variant runs (PSTRAIN_CPU_ISA).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/cpp/cpu_isa_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "worker/layers/cpu_kernel_isa.hpp"

namespace pstrain::testing {
namespace {

using Shape = std::vector<int>;
using Values = std::vector<float>;

struct LayerRun {
  Values top, mask, bottom_diff;
};

// Forward and Backward of `layer_text` on the reference engine
// (impl empty) or under kFast with CPU implementation `impl`.
LayerRun RunLayer(const std::string& layer_text, const Shape& shape, const Values& input,
                  const std::string& impl, int num_tops = 1) {
  BlobSet bottoms, tops;
  Blob* x = bottoms.Add(shape);
  for (int t = 0; t < num_tops; ++t) tops.Add({});
  auto layer = MakeLayer(layer_text, impl.empty() ? Engine::kReference : Engine::kFast);
  Status s = layer->SetUp(bottoms.vec(), tops.vec());
  EXPECT_TRUE(s.ok()) << s.message();
  if (!impl.empty()) {
    s = layer->SelectCpuImplementation(impl);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(layer->CpuImplementation(), impl);
  }
  std::copy(input.begin(), input.end(), x->mutable_cpu_data());
  // Garbage in the outputs: every element must be written.
  Blob* y = tops[0];
  BlobSet::FillUniform(y, 29, 50.f, 60.f);
  float* dx = x->mutable_cpu_diff();
  for (int64_t i = 0; i < x->count(); ++i) dx[i] = 77.f;
  LayerRun run;
  layer->Forward(bottoms.vec(), tops.vec());
  run.top.assign(y->cpu_data(), y->cpu_data() + y->count());
  if (num_tops > 1) run.mask.assign(tops[1]->cpu_data(), tops[1]->cpu_data() + tops[1]->count());
  float* dy = y->mutable_cpu_diff();
  for (int64_t i = 0; i < y->count(); ++i) dy[i] = 0.25f * static_cast<float>(i % 7) - 0.7f;
  layer->Backward(tops.vec(), {true}, bottoms.vec());
  run.bottom_diff.assign(x->cpu_diff(), x->cpu_diff() + x->count());
  return run;
}

// Same values bit for bit, NaN matching NaN.
void ExpectSame(const Values& a, const Values& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
        << what << " at " << i << ": " << a[i] << " vs " << b[i];
  }
}

void ExpectClose(const Values& a, const Values& b, float tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ExpectBlobsNear(a.data(), b.data(), static_cast<int64_t>(a.size()), tol, what);
}

// Values from {0, 1, 2, 3} / 4: windows with many ties.
Values TiedInput(const Shape& shape, uint64_t seed) {
  Blob b(shape);
  BlobSet::FillUniform(&b, seed, 0.f, 4.f);
  Values v(b.cpu_data(), b.cpu_data() + b.count());
  for (float& x : v) x = std::floor(x) / 4.f;
  return v;
}

Values UniformInput(const Shape& shape, uint64_t seed) {
  Blob b(shape);
  BlobSet::FillUniform(&b, seed, -1.f, 1.f);
  return Values(b.cpu_data(), b.cpu_data() + b.count());
}

struct PoolCase {
  std::string param;
  Shape shape;
};

const std::vector<PoolCase>& PoolCases() {
  static const std::vector<PoolCase> cases = {
      {"kernel_size: 2 stride: 2", {2, 3, 24, 24}},
      {"kernel_size: 2 stride: 2", {2, 3, 7, 9}},
      {"kernel_size: 2 stride: 2", {4, 40, 8, 8}},  // many small planes, a partial group
      {"kernel_size: 3 stride: 2", {2, 3, 32, 32}},
      {"kernel_size: 3 stride: 2", {2, 3, 13, 12}},
      {"kernel_size: 3 stride: 2", {3, 7, 55, 55}},
      {"kernel_size: 3 stride: 2 round_mode: FLOOR", {2, 3, 12, 12}},
      {"kernel_size: 3 stride: 2 pad: 1", {2, 3, 13, 12}},
      {"kernel_size: 3 stride: 2 pad: 1", {2, 3, 12, 12}},
      {"kernel_size: 3 stride: 2 pad: 1", {1, 2, 5, 5}},
      {"kernel_size: 2 stride: 2 pad: 1", {2, 3, 5, 5}},  // the dropped last window
      {"kernel_size: 3 stride: 2 pad: 1 round_mode: FLOOR", {2, 3, 12, 11}},
      {"kernel_size: 3 stride: 1 pad: 1", {2, 3, 9, 7}},
      {"kernel_size: 3 stride: 3", {2, 3, 10, 11}},
      {"kernel_size: 2 stride: 3", {2, 3, 11, 10}},  // stride > kernel
      {"kernel_size: 1 stride: 2", {2, 3, 7, 9}},
      {"kernel_size: 5 stride: 2 pad: 2", {2, 3, 9, 14}},
      {"kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0", {2, 4, 7, 5}},
      {"kernel_h: 2 kernel_w: 4 stride_h: 1 stride_w: 3 pad_h: 1 pad_w: 2", {2, 3, 6, 13}},
      {"global_pooling: true", {2, 16, 7, 7}},
      {"global_pooling: true", {2, 5, 5, 3}},
      {"kernel_size: 4 stride: 1", {1, 3, 4, 4}},  // one output per plane, as global
  };
  return cases;
}

std::string PoolLayer(const std::string& pool, const std::string& param) {
  return "name: 'pool' type: 'Pooling' pooling_param { pool: " + pool + " " + param + " }";
}

TEST(VectorPoolingTest, MaxEqualsReferenceBitForBit) {
  IsaRestorer restore;
  for (CpuIsa isa : RunnableIsas()) {
    OverrideKernelIsa(isa);
    for (const PoolCase& c : PoolCases()) {
      for (int num_tops : {1, 2}) {
        for (bool ties : {false, true}) {
          SCOPED_TRACE(std::string(CpuIsaName(isa)) + " MAX " + c.param + " tops " +
                       std::to_string(num_tops) + (ties ? " ties" : ""));
          const std::string text = PoolLayer("MAX", c.param);
          const Values in = ties ? TiedInput(c.shape, 5) : UniformInput(c.shape, 5);
          const LayerRun ref = RunLayer(text, c.shape, in, "", num_tops);
          const LayerRun vec = RunLayer(text, c.shape, in, "vector", num_tops);
          EXPECT_EQ(LastKernelIsa(), isa);
          ExpectSame(vec.top, ref.top, "top");
          ExpectSame(vec.mask, ref.mask, "mask");
          ExpectSame(vec.bottom_diff, ref.bottom_diff, "bottom diff");
        }
      }
    }
  }
}

// -inf and NaN where a clipped window starts (the scan from padding must
// still report the reference's first element) and inside windows.
TEST(VectorPoolingTest, MaxInfinitiesAndNanAsTheReference) {
  IsaRestorer restore;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (CpuIsa isa : RunnableIsas()) {
    OverrideKernelIsa(isa);
    for (const std::string param :
         {"kernel_size: 3 stride: 2 pad: 1", "kernel_size: 3 stride: 2", "kernel_size: 2"}) {
      const Shape shape = {1, 2, 9, 9};
      Values in = UniformInput(shape, 8);
      for (size_t i = 0; i < in.size(); i += 5) in[i] = -inf;
      for (size_t i = 3; i < in.size(); i += 11) in[i] = nan;
      in[0] = nan;
      in[81] = -inf;
      SCOPED_TRACE(std::string(CpuIsaName(isa)) + " " + param);
      const LayerRun ref = RunLayer(PoolLayer("MAX", param), shape, in, "", 2);
      const LayerRun vec = RunLayer(PoolLayer("MAX", param), shape, in, "vector", 2);
      ExpectSame(vec.top, ref.top, "top");
      ExpectSame(vec.mask, ref.mask, "mask");
    }
  }
}

TEST(VectorPoolingTest, AveMatchesReference) {
  IsaRestorer restore;
  for (CpuIsa isa : RunnableIsas()) {
    OverrideKernelIsa(isa);
    for (const PoolCase& c : PoolCases()) {
      SCOPED_TRACE(std::string(CpuIsaName(isa)) + " AVE " + c.param);
      const std::string text = PoolLayer("AVE", c.param);
      const Values in = UniformInput(c.shape, 6);
      const LayerRun ref = RunLayer(text, c.shape, in, "");
      const LayerRun vec = RunLayer(text, c.shape, in, "vector");
      // Forward adds the reference's terms in its order (global pooling: in
      // 16 partial sums); backward in another order.
      if (c.param.find("global") == std::string::npos) ExpectSame(vec.top, ref.top, "top");
      ExpectClose(vec.top, ref.top, 1e-6f, "top");
      ExpectClose(vec.bottom_diff, ref.bottom_diff, 1e-6f, "bottom diff");
    }
  }
}

TEST(VectorPoolingTest, ImplementationsByName) {
  BlobSet bottoms, tops;
  bottoms.Add({1, 2, 6, 6});
  tops.Add({});
  auto layer = MakeLayer(PoolLayer("MAX", "kernel_size: 2 stride: 2"), Engine::kFast);
  ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
  EXPECT_EQ(layer->CpuImplementations(),
            std::vector<std::string>({"vector", "onednn", "reference"}));
  EXPECT_EQ(layer->CpuImplementation(), "vector");
  Status s = layer->SelectCpuImplementation("simd");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "layer pool (Pooling) has no CPU implementation 'simd' (choices: vector, onednn, "
            "reference)");
  EXPECT_EQ(layer->CpuImplementation(), "vector");
  ASSERT_TRUE(layer->SelectCpuImplementation("onednn").ok());
  EXPECT_EQ(layer->Implementation(), "onednn");
  // With the mask top oneDNN is not offered, and a selected "onednn" runs the default.
  BlobSet tops2;
  tops2.Add({});
  tops2.Add({});
  auto masked = MakeLayer(PoolLayer("MAX", "kernel_size: 2 stride: 2"), Engine::kFast);
  ASSERT_TRUE(masked->SetUp(bottoms.vec(), tops2.vec()).ok());
  EXPECT_EQ(masked->CpuImplementations(), std::vector<std::string>({"vector", "reference"}));
  ASSERT_FALSE(masked->SelectCpuImplementation("onednn").ok());
  // AVE whose last padded window runs past in + pad: no oneDNN either.
  auto ave = MakeLayer(PoolLayer("AVE", "kernel_size: 3 stride: 2 pad: 1"), Engine::kFast);
  ASSERT_TRUE(ave->SetUp(bottoms.vec(), tops.vec()).ok());
  BlobSet b12;
  b12.Add({1, 2, 12, 12});
  ASSERT_TRUE(ave->Reshape(b12.vec(), tops.vec()).ok());
  EXPECT_EQ(ave->CpuImplementations(), std::vector<std::string>({"vector", "reference"}));
}

std::string LrnText(const std::string& param) {
  return "name: 'norm' type: 'LRN' lrn_param { " + param + " }";
}

TEST(VectorLrnTest, AcrossChannelsMatchesReference) {
  IsaRestorer restore;
  const std::vector<std::pair<std::string, Shape>> cases = {
      {"local_size: 5 alpha: 0.0001 beta: 0.75", {2, 12, 9, 9}},
      {"local_size: 5 alpha: 0.3 beta: 0.75 k: 2", {2, 7, 17, 19}},  // 323: blocks of 256 + 67
      {"local_size: 3 alpha: 0.5 beta: 0.5 k: 1.5", {1, 4, 3, 5}},
      {"local_size: 7 alpha: 0.8 beta: 1 k: 1", {2, 3, 4, 4}},    // window wider than C
      {"local_size: 1 alpha: 0.2 beta: 0.6 k: 1", {1, 3, 6, 6}},  // powf
      {"local_size: 5 alpha: 0.9 beta: 0.3 k: 0.5", {2, 6, 1, 300}},
  };
  for (CpuIsa isa : RunnableIsas()) {
    OverrideKernelIsa(isa);
    for (const auto& [param, shape] : cases) {
      SCOPED_TRACE(std::string(CpuIsaName(isa)) + " " + param);
      const Values in = UniformInput(shape, 11);
      Values scaled = in;
      for (float& v : scaled) v *= 3.f;
      const LayerRun ref = RunLayer(LrnText(param), shape, scaled, "");
      const LayerRun vec = RunLayer(LrnText(param), shape, scaled, "vector");
      EXPECT_EQ(LastKernelIsa(), isa);
      ExpectClose(vec.top, ref.top, 2e-6f, "top");
      ExpectClose(vec.bottom_diff, ref.bottom_diff, 2e-6f, "bottom diff");
    }
  }
}

TEST(VectorLrnTest, Gradients) {
  for (const std::string param :
       {"local_size: 5 alpha: 0.9 beta: 0.75 k: 1", "local_size: 3 alpha: 0.5 beta: 0.6 k: 2"}) {
    SCOPED_TRACE(param);
    BlobSet bottoms, tops;
    BlobSet::FillGaussian(bottoms.Add({2, 7, 3, 4}), 13);
    tops.Add({});
    auto layer = MakeLayer(LrnText(param), Engine::kFast);
    ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
    ASSERT_EQ(layer->CpuImplementation(), "vector");
    CheckGradients(*layer, bottoms.vec(), tops.vec());
  }
}

TEST(VectorLrnTest, ImplementationsByName) {
  BlobSet bottoms, tops;
  bottoms.Add({1, 4, 3, 3});
  tops.Add({});
  auto across = MakeLayer(LrnText("local_size: 3"), Engine::kFast);
  ASSERT_TRUE(across->SetUp(bottoms.vec(), tops.vec()).ok());
  EXPECT_EQ(across->CpuImplementations(),
            std::vector<std::string>({"vector", "onednn", "reference"}));
  EXPECT_EQ(across->CpuImplementation(), "vector");
  auto within = MakeLayer(LrnText("local_size: 3 norm_region: WITHIN_CHANNEL"), Engine::kFast);
  ASSERT_TRUE(within->SetUp(bottoms.vec(), tops.vec()).ok());
  EXPECT_EQ(within->CpuImplementations(), std::vector<std::string>({"onednn", "reference"}));
  Status s = within->SelectCpuImplementation("vector");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "layer norm (LRN) has no CPU implementation 'vector' (choices: onednn, reference)");
  ASSERT_TRUE(within->SelectCpuImplementation("reference").ok());
  EXPECT_EQ(within->Implementation(), "reference");
}

TEST(CpuKernelIsaTest, SupportedFollowsCpuid) {
#if !defined(__x86_64__)
  EXPECT_EQ(SupportedCpuIsa(), CpuIsa::kGeneric);
  return;
#endif
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  EXPECT_EQ(SupportedCpuIsa(), avx512 ? CpuIsa::kAvx512 : avx2 ? CpuIsa::kAvx2 : CpuIsa::kGeneric);
  std::printf("vectorised kernels: this CPU runs %s\n", CpuIsaName(SupportedCpuIsa()));
}

TEST(CpuKernelIsaTest, SettingLowersTheVariant) {
  EXPECT_EQ(CpuIsaFromSetting(nullptr, CpuIsa::kAvx512).value(), CpuIsa::kAvx512);
  EXPECT_EQ(CpuIsaFromSetting("", CpuIsa::kAvx2).value(), CpuIsa::kAvx2);
  EXPECT_EQ(CpuIsaFromSetting("avx2", CpuIsa::kAvx512).value(), CpuIsa::kAvx2);
  EXPECT_EQ(CpuIsaFromSetting("generic", CpuIsa::kAvx2).value(), CpuIsa::kGeneric);
  Result<CpuIsa> high = CpuIsaFromSetting("avx512", CpuIsa::kAvx2);
  ASSERT_FALSE(high.ok());
  EXPECT_EQ(high.status().message(), "PSTRAIN_CPU_ISA=avx512: this CPU supports up to avx2");
  Result<CpuIsa> unknown = CpuIsaFromSetting("sse4", CpuIsa::kAvx512);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "PSTRAIN_CPU_ISA=sse4: unknown (choices: generic, avx2, avx512)");
}

// The variant a forward ran is the one chosen (each runnable one in turn).
TEST(CpuKernelIsaTest, DispatchRunsTheChosenVariant) {
  IsaRestorer restore;
  for (CpuIsa isa : RunnableIsas()) {
    OverrideKernelIsa(isa);
    const Shape shape = {1, 2, 4, 4};
    RunLayer(PoolLayer("MAX", "kernel_size: 2 stride: 2"), shape, UniformInput(shape, 1), "vector");
    EXPECT_EQ(LastKernelIsa(), isa) << CpuIsaName(isa);
  }
}

}  // namespace
}  // namespace pstrain::testing

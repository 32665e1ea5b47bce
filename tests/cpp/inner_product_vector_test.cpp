// Tests of InnerProduct's "vector" implementation (worker/layers/
// inner_product_cpu_kernels.hpp) on every ISA variant this CPU runs: the three
// kernels against sums in double precision, over shapes with tails in every
// dimension (rows, outputs and inputs not multiples of the tiles or vectors,
// inputs long enough for backward data's column chunks); the layer against
// the reference (BLAS) path, parameter gradients accumulating; and when the
// implementation is offered (few rows, a large W not transposed, AVX2 or
// AVX-512).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/cpp/cpu_isa_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "worker/layers/inner_product_cpu_kernels.hpp"
#include "worker/layers/inner_product_layer.hpp"

namespace pstrain::testing {
namespace {

using Values = std::vector<float>;

Values Uniform(int64_t n, uint64_t seed) {
  Blob b(std::vector<int>{static_cast<int>(n)});
  BlobSet::FillUniform(&b, seed, -1.f, 1.f);
  return Values(b.cpu_data(), b.cpu_data() + n);
}

// |got - want| within 1e-6 of the sum of the terms' magnitudes (float
// rounding of a sum of that many terms), for every element.
void ExpectSums(const Values& got, const std::vector<double>& want,
                const std::vector<double>& magnitude, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-6 * (magnitude[i] + 1.0)) << what << " at " << i;
  }
}

struct FcCase {
  int m, n, k;
};

// Tails everywhere: kFcFwdRows 3 or 5, outputs per tile 3, 4, 8, 12 or 16, 4 to 16
// lanes; k = 8200 makes backward data use two column chunks.
const std::vector<FcCase> kCases = {{1, 1, 1},    {1, 3, 5},    {3, 13, 37},
                                    {5, 16, 64},  {7, 33, 100}, {10, 29, 300},
                                    {32, 70, 65}, {2, 5, 8200}, {4, 17, 9}};

TEST(VectorInnerProductTest, KernelsEqualDoubleSums) {
  IsaRestorer restore;
  for (CpuIsa isa : RunnableIsas()) {
    OverrideKernelIsa(isa);
    for (const FcCase& c : kCases) {
      SCOPED_TRACE(std::string(CpuIsaName(isa)) + " m " + std::to_string(c.m) + " n " +
                   std::to_string(c.n) + " k " + std::to_string(c.k));
      const FcShape shape{c.m, c.n, c.k};
      const Values x = Uniform(int64_t{c.m} * c.k, 1), w = Uniform(int64_t{c.n} * c.k, 2);
      const Values bias = Uniform(c.n, 3), dy = Uniform(int64_t{c.m} * c.n, 4);
      const Values dw0 = Uniform(int64_t{c.n} * c.k, 5);  // diffs accumulate onto these
      std::vector<double> y(c.m * c.n), y_mag(c.m * c.n), dx(int64_t{c.m} * c.k),
          dx_mag(int64_t{c.m} * c.k), dw(int64_t{c.n} * c.k), dw_mag(int64_t{c.n} * c.k);
      for (int i = 0; i < c.m; ++i) {
        for (int j = 0; j < c.n; ++j) {
          double s = bias[j], mag = std::fabs(bias[j]);
          for (int t = 0; t < c.k; ++t) {
            const double term = double{x[int64_t{i} * c.k + t]} * w[int64_t{j} * c.k + t];
            s += term;
            mag += std::fabs(term);
          }
          y[i * c.n + j] = s;
          y_mag[i * c.n + j] = mag;
        }
      }
      for (int i = 0; i < c.m; ++i) {
        for (int t = 0; t < c.k; ++t) {
          for (int j = 0; j < c.n; ++j) {
            const double term = double{dy[i * c.n + j]} * w[int64_t{j} * c.k + t];
            dx[int64_t{i} * c.k + t] += term;
            dx_mag[int64_t{i} * c.k + t] += std::fabs(term);
          }
        }
      }
      for (int j = 0; j < c.n; ++j) {
        for (int t = 0; t < c.k; ++t) {
          double s = dw0[int64_t{j} * c.k + t], mag = std::fabs(s);
          for (int i = 0; i < c.m; ++i) {
            const double term = double{dy[i * c.n + j]} * x[int64_t{i} * c.k + t];
            s += term;
            mag += std::fabs(term);
          }
          dw[int64_t{j} * c.k + t] = s;
          dw_mag[int64_t{j} * c.k + t] = mag;
        }
      }
      Values got_y(y.size(), 99.f), got_dx(dx.size(), 99.f), got_dw = dw0;  // garbage outputs
      FcForward(shape, x.data(), w.data(), bias.data(), got_y.data());
      EXPECT_EQ(LastKernelIsa(), isa);
      ExpectSums(got_y, y, y_mag, "top");
      FcBackwardData(shape, dy.data(), w.data(), got_dx.data());
      ExpectSums(got_dx, dx, dx_mag, "bottom diff");
      FcBackwardWeights(shape, dy.data(), x.data(), got_dw.data());
      ExpectSums(got_dw, dw, dw_mag, "weight diff");
      // No bias: the plain products.
      FcForward(shape, x.data(), w.data(), nullptr, got_y.data());
      for (int i = 0; i < c.m; ++i) {
        for (int j = 0; j < c.n; ++j) y[i * c.n + j] -= bias[j];
      }
      ExpectSums(got_y, y, y_mag, "top without bias");
    }
  }
}

std::string Ip(const std::string& extra) {
  return "name: 'fc' type: 'InnerProduct' inner_product_param { " + extra +
         " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } "
         "}";
}

// The layer on "vector" agrees with the reference engine (BLAS): top, bottom
// diff, and weight and bias diffs accumulated onto non-zero values. (The
// reference's finite-difference checks are inner_product_layer_test.cpp's.)
TEST(VectorInnerProductTest, LayerAgreesWithTheReference) {
  IsaRestorer restore;
  for (CpuIsa isa : RunnableIsas()) {
    if (isa == CpuIsa::kGeneric) continue;  // not offered there
    OverrideKernelIsa(isa);
    for (const auto& [extra, shape] : std::vector<std::pair<std::string, std::vector<int>>>{
             {"num_output: 1024", {3, 1024}},  // 2^20 weights, the fewest offered
             {"num_output: 1100", {10, 4, 16, 16}},
             {"num_output: 37 axis: 2", {2, 3, 30000}},  // M = 6 rows
             {"num_output: 520 bias_term: false", {32, 2048}}}) {
      SCOPED_TRACE(std::string(CpuIsaName(isa)) + " " + extra);
      BlobSet bottoms, tops;
      bottoms.Add(shape);
      tops.Add({});
      auto layer = MakeLayer(Ip(extra), Engine::kFast);
      ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
      EXPECT_EQ(layer->Implementation(), isa == CpuIsa::kAvx512 ? "vector" : "reference");
      if (isa != CpuIsa::kAvx512) continue;  // the engine fast default runs "vector" below
      ExpectEnginesAgree(Ip(extra), {shape},
                         [](const BlobVec& b) { BlobSet::FillUniform(b[0], 7, -1.f, 1.f); });
    }
  }
}

TEST(VectorInnerProductTest, OfferedForFewRowsAndCaffesLayout) {
  IsaRestorer restore;
  const auto implementations = [](const std::string& extra, std::vector<int> shape) {
    BlobSet bottoms, tops;
    bottoms.Add(shape);
    tops.Add({});
    auto layer = MakeLayer(Ip(extra), Engine::kFast);
    EXPECT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
    return layer->CpuImplementations();
  };
  using Names = std::vector<std::string>;
  const int rows = InnerProductLayer::kVectorMaxRows;
  OverrideKernelIsa(CpuIsa::kGeneric);
  EXPECT_EQ(implementations("num_output: 1024", {10, 1024}), Names{"reference"});
  if (SupportedCpuIsa() >= CpuIsa::kAvx2) {
    OverrideKernelIsa(CpuIsa::kAvx2);
    EXPECT_EQ(implementations("num_output: 1024", {10, 1024}), (Names{"reference", "vector"}));
  }
  if (SupportedCpuIsa() < CpuIsa::kAvx512) return;
  OverrideKernelIsa(CpuIsa::kAvx512);
  EXPECT_EQ(implementations("num_output: 1024", {10, 1024}), (Names{"vector", "reference"}));
  EXPECT_EQ(implementations("num_output: 1024", {rows, 1024}), (Names{"vector", "reference"}));
  EXPECT_EQ(implementations("num_output: 1024", {rows + 1, 1024}), Names{"reference"});
  EXPECT_EQ(implementations("num_output: 1023", {10, 1024}), Names{"reference"});  // W fits
  EXPECT_EQ(implementations("num_output: 1024 transpose: true", {10, 1024}), Names{"reference"});

  // A selection the shape cannot run: refused by name; after a Reshape to
  // more rows the layer runs the reference, and "vector" again after one back.
  BlobSet bottoms, tops;
  bottoms.Add({10, 1024});
  tops.Add({});
  auto transposed = MakeLayer(Ip("num_output: 1024 transpose: true"), Engine::kFast);
  ASSERT_TRUE(transposed->SetUp(bottoms.vec(), tops.vec()).ok());
  Status s = transposed->SelectCpuImplementation("vector");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "layer fc (InnerProduct) has no CPU implementation 'vector' (choices: reference)");
  auto layer = MakeLayer(Ip("num_output: 1024"), Engine::kFast);
  ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
  ASSERT_TRUE(layer->SelectCpuImplementation("vector").ok());
  bottoms[0]->Reshape({rows + 8, 1024});
  ASSERT_TRUE(layer->Reshape(bottoms.vec(), tops.vec()).ok());
  EXPECT_EQ(layer->Implementation(), "reference");
  bottoms[0]->Reshape({2, 1024});
  ASSERT_TRUE(layer->Reshape(bottoms.vec(), tops.vec()).ok());
  EXPECT_EQ(layer->Implementation(), "vector");
}

}  // namespace
}  // namespace pstrain::testing

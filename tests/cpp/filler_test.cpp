// Tests of worker/filler: every filler type against its definition (Caffe's
// formulas, computed here by hand or by sample statistics), determinism for a
// seed, and the exact ValidateFiller messages.
#include "worker/filler.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace pstrain {
namespace {

caffe::FillerParameter ParseFiller(const std::string& text) {
  caffe::FillerParameter filler;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &filler)) << text;
  return filler;
}

// Fills a fresh blob of `shape` with seed 42 (checking ValidateFiller first).
std::vector<float> FillValues(const std::string& filler_text, const std::vector<int>& shape,
                              uint64_t seed = 42) {
  const caffe::FillerParameter filler = ParseFiller(filler_text);
  Blob blob(shape);
  Status valid = ValidateFiller(filler, blob);
  EXPECT_TRUE(valid.ok()) << valid.message();
  Rng rng(seed);
  Fill(filler, rng, &blob);
  return std::vector<float>(blob.cpu_data(), blob.cpu_data() + blob.count());
}

struct Moments {
  double mean = 0;
  double stddev = 0;
  double max_abs = 0;
};

Moments Measure(const std::vector<float>& v) {
  Moments m;
  for (float x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  double var = 0;
  for (float x : v) {
    var += (x - m.mean) * (x - m.mean);
    m.max_abs = std::max(m.max_abs, std::fabs(static_cast<double>(x)));
  }
  m.stddev = std::sqrt(var / static_cast<double>(v.size()));
  return m;
}

TEST(FillerTest, ConstantSetsEveryValue) {
  for (float x : FillValues("type: 'constant' value: 2.5", {3, 4, 5})) EXPECT_EQ(x, 2.5f);
  // The default constant is 0.
  for (float x : FillValues("type: 'constant'", {7})) EXPECT_EQ(x, 0.f);
}

TEST(FillerTest, UniformStaysInRangeAndCoversIt) {
  const auto v = FillValues("type: 'uniform' min: -0.5 max: 1.5", {100, 100});
  float lo = 10.f, hi = -10.f;
  for (float x : v) {
    ASSERT_GE(x, -0.5f);
    ASSERT_LE(x, 1.5f);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_LT(lo, -0.49f);
  EXPECT_GT(hi, 1.49f);
  const Moments m = Measure(v);
  EXPECT_NEAR(m.mean, 0.5, 0.02);
  EXPECT_NEAR(m.stddev, 2.0 / std::sqrt(12.0), 0.01);  // width / sqrt(12)
}

TEST(FillerTest, GaussianHasTheGivenMeanAndStd) {
  const Moments m = Measure(FillValues("type: 'gaussian' mean: 3 std: 0.5", {200, 250}));
  EXPECT_NEAR(m.mean, 3.0, 0.01);
  EXPECT_NEAR(m.stddev, 0.5, 0.01);
}

TEST(FillerTest, SparseGaussianKeepsSparseOverNumOutputs) {
  // Caffe keeps each value with probability sparse / shape(0) = 3 / 10.
  const auto v = FillValues("type: 'gaussian' std: 1 sparse: 3", {10, 2000});
  int nonzero = 0;
  for (float x : v) nonzero += x != 0.f;
  EXPECT_NEAR(nonzero / static_cast<double>(v.size()), 0.3, 0.015);
}

// Xavier: uniform(-a, a), a = sqrt(3 / n); MSRA: gaussian(0, sqrt(2 / n));
// n is fan_in = count / shape(0), fan_out = count / shape(1) or their mean.
struct FanCase {
  const char* norm;
  double n;
};

TEST(FillerTest, XavierScaleFollowsVarianceNorm) {
  // Shape [200, 400]: fan_in 400, fan_out 200, average 300.
  for (const FanCase c :
       {FanCase{"FAN_IN", 400}, FanCase{"FAN_OUT", 200}, FanCase{"AVERAGE", 300}}) {
    SCOPED_TRACE(c.norm);
    const auto v = FillValues(std::string("type: 'xavier' variance_norm: ") + c.norm, {200, 400});
    const double a = std::sqrt(3.0 / c.n);
    const Moments m = Measure(v);
    EXPECT_LE(m.max_abs, a + 1e-6);
    EXPECT_GT(m.max_abs, 0.995 * a);
    EXPECT_NEAR(m.stddev, a / std::sqrt(3.0), 0.01 * a);
    EXPECT_NEAR(m.mean, 0.0, 0.01 * a);
  }
  // The default is FAN_IN; with 4 axes fan_in is count / shape(0) = 3 * 5 * 5.
  const Moments m = Measure(FillValues("type: 'xavier'", {400, 3, 5, 5}));
  EXPECT_LE(m.max_abs, std::sqrt(3.0 / 75) + 1e-6);
  EXPECT_GT(m.max_abs, 0.995 * std::sqrt(3.0 / 75));
}

TEST(FillerTest, MsraStdFollowsVarianceNorm) {
  for (const FanCase c :
       {FanCase{"FAN_IN", 400}, FanCase{"FAN_OUT", 200}, FanCase{"AVERAGE", 300}}) {
    SCOPED_TRACE(c.norm);
    const Moments m =
        Measure(FillValues(std::string("type: 'msra' variance_norm: ") + c.norm, {200, 400}));
    const double stddev = std::sqrt(2.0 / c.n);
    EXPECT_NEAR(m.stddev, stddev, 0.01 * stddev);
    EXPECT_NEAR(m.mean, 0.0, 0.01 * stddev);
  }
}

TEST(FillerTest, PositiveUnitballRowsSumToOne) {
  const auto v = FillValues("type: 'positive_unitball'", {6, 2, 3, 4});
  for (int r = 0; r < 6; ++r) {
    double sum = 0;
    for (int j = 0; j < 24; ++j) {
      const float x = v[r * 24 + j];
      EXPECT_GE(x, 0.f);
      EXPECT_LE(x, 1.f);
      sum += x;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
}

TEST(FillerTest, BilinearFourByFourKernelByHand) {
  // width 4: f = ceil(4 / 2) = 2, c = (2f - 1 - f % 2) / (2f) = 3 / 4; the
  // 1-D weights (1 - |x / f - c|) for x = 0..3 are 0.25, 0.75, 0.75, 0.25 and
  // the kernel is their outer product, repeated for every (n, c) pair.
  const float w[4] = {0.25f, 0.75f, 0.75f, 0.25f};
  const auto v = FillValues("type: 'bilinear'", {2, 3, 4, 4});
  for (int k = 0; k < 6; ++k) {
    for (int y = 0; y < 4; ++y) {
      for (int x = 0; x < 4; ++x) {
        EXPECT_FLOAT_EQ(v[k * 16 + y * 4 + x], w[y] * w[x]) << k << " " << y << " " << x;
      }
    }
  }
}

TEST(FillerTest, BilinearThreeByThreeKernelByHand) {
  // width 3: f = 2, c = (4 - 1 - 0) / 4 = 0.75; weights 0.25, 0.75, 0.75.
  const float w[3] = {0.25f, 0.75f, 0.75f};
  const auto v = FillValues("type: 'bilinear'", {1, 1, 3, 3});
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 3; ++x) EXPECT_FLOAT_EQ(v[y * 3 + x], w[y] * w[x]);
  }
}

TEST(FillerTest, SameSeedSameValuesOtherSeedOtherValues) {
  for (const char* text :
       {"type: 'uniform' min: -1 max: 1", "type: 'gaussian' std: 1", "type: 'xavier'",
        "type: 'msra'", "type: 'positive_unitball'", "type: 'gaussian' std: 1 sparse: 2"}) {
    SCOPED_TRACE(text);
    const auto a = FillValues(text, {8, 16}, 7);
    const auto b = FillValues(text, {8, 16}, 7);
    const auto c = FillValues(text, {8, 16}, 8);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
  }
}

std::string ValidationError(const std::string& text, const std::vector<int>& shape) {
  Blob blob(shape);
  Status s = ValidateFiller(ParseFiller(text), blob);
  EXPECT_FALSE(s.ok()) << text;
  return s.message();
}

TEST(FillerTest, ValidateFillerMessages) {
  EXPECT_EQ(ValidationError("type: 'uniform' min: 2 max: 1", {3}),
            "uniform filler needs min <= max");
  EXPECT_EQ(ValidationError("type: 'gaussian' std: -1", {3}), "gaussian filler needs std >= 0");
  EXPECT_EQ(ValidationError("type: 'xavier'", {0, 3}), "xavier filler needs a non-empty blob");
  EXPECT_EQ(ValidationError("type: 'msra'", {}), "msra filler needs a non-empty blob");
  EXPECT_EQ(ValidationError("type: 'bilinear'", {1, 2, 3}),
            "bilinear filler needs a 4-D blob with square kernels, got 1 2 3 (6)");
  EXPECT_EQ(ValidationError("type: 'bilinear'", {1, 1, 3, 4}),
            "bilinear filler needs a 4-D blob with square kernels, got 1 1 3 4 (12)");
  EXPECT_EQ(ValidationError("type: 'gauss'", {3}),
            "unknown filler type 'gauss' (known: constant, uniform, gaussian, xavier, msra, "
            "positive_unitball, bilinear)");
  Blob blob({2, 2});
  EXPECT_TRUE(ValidateFiller(ParseFiller("type: 'uniform' min: 1 max: 1"), blob).ok());
  EXPECT_TRUE(ValidateFiller(ParseFiller("type: 'bilinear'"), Blob({1, 1, 2, 2})).ok());
}

}  // namespace
}  // namespace pstrain

// The element-wise layers of Caffe's catalogue on the NeuronLayer base:
// AbsVal, BNLL, ELU, Exp, Log, Power, PReLU, Swish, Threshold, Clip. Forward
// and backward against hand-computed values (out of place and in place),
// finite-difference gradients on the CPU engines and on the GPU (skipped
// without a device), and the set-up errors of bad parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::CheckGradients;
using testing::GradientCheckOptions;
using testing::MakeLayer;

// Runs forward then backward (top diff dy) on x with the reference engine,
// out of place and, unless `in_place` is false, in place; checks y and dx.
void ExpectByHand(const std::string& prototxt, const std::vector<float>& x,
                  const std::vector<float>& dy, const std::vector<float>& y,
                  const std::vector<float>& dx, bool in_place = true) {
  for (bool same : {false, true}) {
    if (same && !in_place) continue;
    SCOPED_TRACE(prototxt + (same ? " in place" : " out of place"));
    BlobSet blobs;
    Blob* bottom = blobs.Add({1, static_cast<int>(x.size())});
    Blob* top = same ? bottom : blobs.Add({});
    std::copy(x.begin(), x.end(), bottom->mutable_cpu_data());
    auto layer = MakeLayer(prototxt, Engine::kReference);
    const Status s = layer->SetUp({bottom}, {top});
    ASSERT_TRUE(s.ok()) << s.message();
    layer->Forward({bottom}, {top});
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(top->cpu_data()[i], y[i], 1e-5) << i;
    std::copy(dy.begin(), dy.end(), top->mutable_cpu_diff());
    layer->Backward({top}, {true}, {bottom});
    for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(bottom->cpu_diff()[i], dx[i], 1e-5) << i;
  }
}

TEST(NeuronCatalogueTest, AbsValByHand) {
  ExpectByHand("type: 'AbsVal'", {-2, 0, 3}, {1, 2, 3}, {2, 0, 3}, {-1, 0, 3}, false);
}

TEST(NeuronCatalogueTest, BNLLByHand) {
  const float ln3 = std::log(3.f);
  ExpectByHand("type: 'BNLL'", {0, ln3, -ln3, 100}, {1, 1, 2, 1},
               {std::log(2.f), std::log(4.f), std::log(4.f / 3.f), 100}, {0.5f, 0.75f, 0.5f, 1});
}

TEST(NeuronCatalogueTest, ELUByHand) {
  ExpectByHand("type: 'ELU' elu_param { alpha: 0.5 }", {-std::log(2.f), 0, 2}, {2, 2, 2},
               {-0.25f, 0, 2}, {0.5f, 1, 2});
  ExpectByHand("type: 'ELU'", {-std::log(4.f), 1}, {1, 3}, {-0.75f, 1}, {0.25f, 3});
}

TEST(NeuronCatalogueTest, ExpByHand) {
  const float ln2 = std::log(2.f);
  ExpectByHand("type: 'Exp' exp_param { base: 2 scale: 2 shift: 1 }", {0, 1, -0.5f}, {1, 1, 2},
               {2, 8, 1}, {4 * ln2, 16 * ln2, 4 * ln2});
  ExpectByHand("type: 'Exp'", {0, 1}, {1, 2}, {1, std::exp(1.f)}, {1, 2 * std::exp(1.f)});
}

TEST(NeuronCatalogueTest, LogByHand) {
  const float ln10 = std::log(10.f);
  ExpectByHand("type: 'Log' log_param { base: 10 scale: 2 shift: 1 }", {0, 4.5f, 49.5f}, {1, 1, 1},
               {0, 1, 2}, {2 / ln10, 0.2f / ln10, 0.02f / ln10});
  ExpectByHand("type: 'Log'", {1, std::exp(2.f)}, {1, 1}, {0, 2}, {1, std::exp(-2.f)});
}

TEST(NeuronCatalogueTest, PowerByHand) {
  ExpectByHand("type: 'Power' power_param { power: 2 scale: 3 shift: 1 }", {0, 1, -1}, {1, 1, 1},
               {1, 16, 4}, {6, 24, -12});
  ExpectByHand("type: 'Power' power_param { power: 0 }", {5, -2}, {1, 1}, {1, 1}, {0, 0});
  ExpectByHand("type: 'Power' power_param { power: 3 scale: 0 shift: 2 }", {5, -2}, {1, 1}, {8, 8},
               {0, 0});
  ExpectByHand("type: 'Power'", {-1.5f, 2}, {3, 4}, {-1.5f, 2}, {3, 4});
}

TEST(NeuronCatalogueTest, SwishByHand) {
  const float ln3 = std::log(3.f);
  const float y = 0.75f * ln3;  // sigmoid(ln 3) = 0.75
  ExpectByHand("type: 'Swish'", {0, ln3}, {2, 1}, {0, y}, {1, y + 0.75f * (1 - y)});
  // beta 2 at x = ln(3) / 2: sigmoid(beta x) = 0.75 again.
  const float x2 = ln3 / 2, y2 = 0.75f * x2;
  ExpectByHand("type: 'Swish' swish_param { beta: 2 }", {x2}, {1}, {y2},
               {2 * y2 + 0.75f * (1 - 2 * y2)});
}

TEST(NeuronCatalogueTest, ThresholdByHand) {
  ExpectByHand("type: 'Threshold' threshold_param { threshold: 0.5 }", {0.4f, 0.5f, 0.6f},
               {1, 1, 1}, {0, 0, 1}, {0, 0, 0});
  ExpectByHand("type: 'Threshold'", {-1, 0, 1e-3f}, {1, 1, 1}, {0, 0, 1}, {0, 0, 0});
  auto layer = MakeLayer("type: 'Threshold'", Engine::kReference);
  EXPECT_FALSE(layer->AllowForceBackward(0));
}

TEST(NeuronCatalogueTest, ClipByHand) {
  // In place the top holds -1 and 2 where x was clipped: the kept bottom
  // still gives those positions no gradient.
  ExpectByHand("type: 'Clip' clip_param { min: -1 max: 2 }", {-3, -1, 0.5f, 2, 5}, {1, 1, 1, 1, 1},
               {-1, -1, 0.5f, 2, 2}, {0, 1, 1, 1, 0});
}

TEST(NeuronCatalogueTest, PReLUByHand) {
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "out of place");
    BlobSet blobs;
    Blob* bottom = blobs.Add({1, 2, 2});
    Blob* top = in_place ? bottom : blobs.Add({});
    const float x[] = {-2, 3, -4, 1};
    std::copy(x, x + 4, bottom->mutable_cpu_data());
    auto layer = MakeLayer("type: 'PReLU'", Engine::kReference);
    ASSERT_TRUE(layer->SetUp({bottom}, {top}).ok());
    ASSERT_EQ(layer->blobs().size(), 1u);
    EXPECT_EQ(layer->blobs()[0]->shape(), std::vector<int>{2});
    EXPECT_FLOAT_EQ(layer->blobs()[0]->cpu_data()[1], 0.25f);  // Caffe's default filler
    layer->blobs()[0]->mutable_cpu_data()[0] = 0.5f;
    layer->blobs()[0]->mutable_cpu_data()[1] = -1.f;
    layer->blobs()[0]->SetDiffZero();
    layer->Forward({bottom}, {top});
    const float y[] = {-1, 3, 4, 1};
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(top->cpu_data()[i], y[i]) << i;
    const float dy[] = {1, 1, 1, 2};
    std::copy(dy, dy + 4, top->mutable_cpu_diff());
    layer->Backward({top}, {true}, {bottom});
    const float dx[] = {0.5f, 1, -1, 2};
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(bottom->cpu_diff()[i], dx[i]) << i;
    EXPECT_FLOAT_EQ(layer->blobs()[0]->cpu_diff()[0], -2.f);
    EXPECT_FLOAT_EQ(layer->blobs()[0]->cpu_diff()[1], -4.f);
  }
}

TEST(NeuronCatalogueTest, PReLUChannelSharedAndFiller) {
  BlobSet bottom, top;
  bottom.Add({2, 3, 2});
  top.Add({});
  auto layer = MakeLayer(
      "type: 'PReLU' prelu_param { channel_shared: true filler { type: 'constant' value: 0.1 } }",
      Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  EXPECT_EQ(layer->blobs()[0]->shape(), std::vector<int>{1});
  EXPECT_FLOAT_EQ(layer->blobs()[0]->cpu_data()[0], 0.1f);
}

// Values in [lo, hi] that stay `margin` away from every kink.
void FillAwayFrom(Blob* blob, uint64_t seed, float lo, float hi, const std::vector<float>& kinks,
                  float margin = 0.05f) {
  BlobSet::FillUniform(blob, seed, lo, hi);
  float* d = blob->mutable_cpu_data();
  for (int64_t i = 0; i < blob->count(); ++i) {
    for (float k : kinks) {
      if (std::fabs(d[i] - k) < margin) d[i] = k + (d[i] < k ? -margin : margin);
    }
  }
}

struct GradientCase {
  std::string proto;
  float lo, hi;
  std::vector<float> kinks;
};

std::vector<GradientCase> GradientCases() {
  return {
      {"type: 'AbsVal'", -2, 2, {0}},
      {"type: 'BNLL'", -3, 3, {}},
      {"type: 'ELU' elu_param { alpha: 0.7 }", -2, 2, {0}},
      {"type: 'Exp' exp_param { base: 3 scale: 0.5 shift: 0.2 }", -2, 2, {}},
      {"type: 'Log' log_param { base: 2 scale: 2 shift: 0.5 }", 0.5, 3, {}},
      {"type: 'Power' power_param { power: 1.7 scale: 0.8 shift: 0.3 }", 0.2, 2, {}},
      {"name: 'p' type: 'PReLU'", -2, 2, {0}},
      {"name: 'p' type: 'PReLU' prelu_param { channel_shared: true }", -2, 2, {0}},
      {"type: 'Swish' swish_param { beta: 1.5 }", -3, 3, {}},
      {"type: 'Clip' clip_param { min: -0.5 max: 0.8 }", -2, 2, {-0.5f, 0.8f}},
  };
}

TEST(NeuronCatalogueTest, GradientsOnCpuEngines) {
  for (const GradientCase& c : GradientCases()) {
    for (Engine engine : {Engine::kReference, Engine::kFast}) {
      SCOPED_TRACE(c.proto + (engine == Engine::kFast ? " fast" : " reference"));
      BlobSet bottom, top;
      bottom.Add({2, 3, 2, 2});
      top.Add({});
      FillAwayFrom(bottom[0], 5, c.lo, c.hi, c.kinks);
      auto layer = MakeLayer(c.proto, engine);
      const Status s = layer->SetUp(bottom.vec(), top.vec());
      ASSERT_TRUE(s.ok()) << s.message();
      if (!layer->blobs().empty()) BlobSet::FillUniform(layer->blobs()[0].get(), 6, -0.5f, 0.5f);
      CheckGradients(*layer, bottom.vec(), top.vec());
    }
  }
}

// The GPU engine: each layer must report its GPU path, its gradients must
// pass the finite-difference check, and it must agree with the reference.
TEST(NeuronCatalogueTest, GradientsOnGpu) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  for (const GradientCase& c : GradientCases()) {
    SCOPED_TRACE(c.proto);
    BlobSet bottom, top;
    bottom.Add({2, 3, 2, 2});
    top.Add({});
    FillAwayFrom(bottom[0], 5, c.lo, c.hi, c.kinks);
    auto layer = MakeLayer(c.proto, Engine::kGpu);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    ASSERT_TRUE(layer->HasGpuPath());
    EXPECT_EQ(layer->Implementation(), "gpu");
    CheckGradients(*layer, bottom.vec(), top.vec());
    testing::ExpectEnginesAgree(
        c.proto, {{4, 5, 3, 3}},
        [&](const BlobVec& b) { FillAwayFrom(b[0], 9, c.lo, c.hi, c.kinks); }, 1e-4f, 1,
        Engine::kGpu);
  }
  auto threshold = MakeLayer("type: 'Threshold'", Engine::kGpu);
  EXPECT_TRUE(threshold->HasGpuPath());
  testing::ExpectEnginesAgree(
      "type: 'Threshold' threshold_param { threshold: 0.3 }", {{3, 4, 5}},
      [](const BlobVec& b) { FillAwayFrom(b[0], 2, -1, 1, {0.3f}); }, 0.f, 1, Engine::kGpu);
}

// In place on the GPU: the kept bottom gives the same gradients as out of place.
TEST(NeuronCatalogueTest, InPlaceOnGpuMatchesReference) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  for (const GradientCase& c : GradientCases()) {
    if (c.proto == "type: 'AbsVal'") continue;
    SCOPED_TRACE(c.proto);
    std::vector<float> dx[2];
    for (Engine engine : {Engine::kReference, Engine::kGpu}) {
      BlobSet blobs;
      Blob* b = blobs.Add({2, 3, 4});
      FillAwayFrom(b, 3, c.lo, c.hi, c.kinks);
      auto layer = MakeLayer(c.proto, engine);
      ASSERT_TRUE(layer->SetUp({b}, {b}).ok());
      if (!layer->blobs().empty()) BlobSet::FillUniform(layer->blobs()[0].get(), 6, -0.5f, 0.5f);
      layer->Forward({b}, {b});
      BlobSet::FillUniform(b, 4, -1, 1);  // sets data; copy it into the diff
      std::vector<float> dy(b->cpu_data(), b->cpu_data() + b->count());
      std::copy(dy.begin(), dy.end(), b->mutable_cpu_diff());
      layer->Backward({b}, {true}, {b});
      dx[engine == Engine::kGpu].assign(b->cpu_diff(), b->cpu_diff() + b->count());
    }
    testing::ExpectBlobsNear(dx[0].data(), dx[1].data(), static_cast<int64_t>(dx[0].size()), 1e-4f,
                             "in-place bottom diff");
  }
}

std::string SetUpError(const std::string& proto, const std::vector<int>& shape = {2, 3},
                       bool in_place = false) {
  BlobSet blobs;
  Blob* bottom = blobs.Add(shape);
  Blob* top = in_place ? bottom : blobs.Add({});
  auto layer = MakeLayer(proto, Engine::kReference);
  return layer->SetUp({bottom}, {top}).message();
}

TEST(NeuronCatalogueTest, BadParameters) {
  EXPECT_EQ(SetUpError("type: 'AbsVal'", {2, 3}, true),
            "AbsVal does not run in place: give the top its own name");
  EXPECT_EQ(SetUpError("type: 'Exp' exp_param { base: 0 }"),
            "exp_param.base must be positive or -1 (for e), got 0");
  EXPECT_EQ(SetUpError("type: 'Log' log_param { base: -2 }"),
            "log_param.base must be positive or -1 (for e), got -2");
  EXPECT_EQ(SetUpError("type: 'Clip' clip_param { min: 2 max: 1 }"),
            "clip_param.min (2) must not exceed clip_param.max (1)");
  EXPECT_EQ(SetUpError("type: 'PReLU'", {5}),
            "PReLU needs a bottom of at least 2 axes, got shape 5 (5)");
  EXPECT_NE(SetUpError("type: 'PReLU' prelu_param { filler { type: 'nonsense' } }"), "");
}

TEST(NeuronCatalogueTest, PReLULoadedSlopesMustMatchChannels) {
  BlobSet bottom, top;
  bottom.Add({2, 3, 2});
  top.Add({});
  auto layer = MakeLayer("type: 'PReLU'", Engine::kReference);
  layer->blobs().push_back(std::make_shared<Blob>(std::vector<int>{4}));
  EXPECT_EQ(layer->SetUp(bottom.vec(), top.vec()).message(),
            "the PReLU slopes (4 (4)) do not match 3 channels of bottom 2 3 2 (12)");
}

TEST(NeuronCatalogueTest, ShapeFollowsBottomAndOneBottomOnly) {
  for (const char* type :
       {"AbsVal", "BNLL", "ELU", "Exp", "Log", "Power", "PReLU", "Swish", "Threshold"}) {
    BlobSet bottom, top;
    bottom.Add({2, 3, 4});
    top.Add({});
    auto layer = MakeLayer(std::string("type: '") + type + "'", Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok()) << type;
    EXPECT_EQ(top[0]->shape(), bottom[0]->shape()) << type;
    BlobSet two;
    two.Add({1, 1});
    two.Add({1, 1});
    EXPECT_EQ(layer->SetUp(two.vec(), top.vec()).message(),
              std::string(type) + " layer takes 1 bottom, got 2");
  }
}

}  // namespace
}  // namespace pstrain

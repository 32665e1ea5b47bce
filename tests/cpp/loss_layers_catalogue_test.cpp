// The loss layers of Caffe's catalogue: ContrastiveLoss (and its legacy
// form), HingeLoss (L1, L2), InfogainLoss (H from a file or a third bottom)
// and MultinomialLogisticLoss. Forward and backward against hand-computed
// values, finite-difference gradients on the CPU engines and on the GPU
// (skipped without a device), which bottoms take gradients, and the errors of
// bad parameters and broken labels.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/proto_io.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::CheckGradients;
using testing::GradientCheckOptions;
using testing::MakeLayer;
using testing::Set;

// Sets up `proto` on `bottom`, runs forward and backward with loss weight 1,
// returns the loss.
float RunLoss(Layer& layer, const BlobVec& bottom, const BlobVec& top) {
  const Status s = layer.SetUp(bottom, top);
  EXPECT_TRUE(s.ok()) << s.message();
  const float loss = layer.Forward(bottom, top);
  std::vector<bool> down;
  for (size_t b = 0; b < bottom.size(); ++b) down.push_back(layer.AllowForceBackward(b));
  layer.Backward(top, down, bottom);
  return loss;
}

void ExpectDiff(const Blob& blob, const std::vector<float>& expected, float tol = 1e-5f) {
  ASSERT_EQ(blob.count(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(blob.cpu_diff()[i], expected[i], tol) << i;
  }
}

TEST(LossCatalogueTest, ContrastiveByHand) {
  for (bool legacy : {false, true}) {
    SCOPED_TRACE(legacy ? "legacy" : "current");
    BlobSet bottom, top;
    Set(bottom.Add({}), {2, 2, 1, 1}, {1, 0, 0, 0});
    Set(bottom.Add({}), {2, 2, 1, 1}, {0, 0, 0, 0.5f});
    Set(bottom.Add({}), {2}, {1, 0});  // similar, dissimilar
    top.Add({});
    auto layer = MakeLayer(std::string("type: 'ContrastiveLoss'") +
                               (legacy ? " contrastive_loss_param { legacy_version: true }" : ""),
                           Engine::kReference);
    const float loss = RunLoss(*layer, bottom.vec(), top.vec());
    // similar: d^2 = 1; dissimilar d = 0.5: (1 - 0.5)^2, legacy 1 - 0.25.
    EXPECT_NEAR(loss, legacy ? (1 + 0.75f) / 4 : (1 + 0.25f) / 4, 1e-6);
    const float b1 = legacy ? 0.25f : 0.5f * 0.5f * 0.5f / (0.5f + 1e-4f);
    ExpectDiff(*bottom[0], {0.5f, 0, 0, b1});
    ExpectDiff(*bottom[1], {-0.5f, 0, 0, -b1});
    EXPECT_FALSE(layer->AllowForceBackward(2));
    EXPECT_TRUE(layer->AllowForceBackward(1));
  }
}

TEST(LossCatalogueTest, ContrastiveBeyondMarginHasNoGradient) {
  BlobSet bottom, top;
  Set(bottom.Add({}), {1, 2}, {3, 0});
  Set(bottom.Add({}), {1, 2}, {0, 0});
  Set(bottom.Add({}), {1}, {0});
  top.Add({});
  auto layer =
      MakeLayer("type: 'ContrastiveLoss' contrastive_loss_param { margin: 2 }", Engine::kReference);
  EXPECT_FLOAT_EQ(RunLoss(*layer, bottom.vec(), top.vec()), 0.f);
  ExpectDiff(*bottom[0], {0, 0});
}

TEST(LossCatalogueTest, HingeByHand) {
  for (bool l2 : {false, true}) {
    SCOPED_TRACE(l2 ? "L2" : "L1");
    BlobSet bottom, top;
    Set(bottom.Add({}), {2, 3}, {0.5f, -0.2f, 2, 1, 0, -3});
    Set(bottom.Add({}), {2}, {2, 0});
    top.Add({});
    auto layer =
        MakeLayer(std::string("type: 'HingeLoss'") + (l2 ? " hinge_loss_param { norm: L2 }" : ""),
                  Engine::kReference);
    const float loss = RunLoss(*layer, bottom.vec(), top.vec());
    // Margins: 1.5 0.8 0 | 0 1 0.
    EXPECT_NEAR(loss, l2 ? (2.25f + 0.64f + 1) / 2 : (1.5f + 0.8f + 1) / 2, 1e-6);
    if (l2) {
      ExpectDiff(*bottom[0], {1.5f, 0.8f, 0, 0, 1, 0});
    } else {
      ExpectDiff(*bottom[0], {0.5f, 0.5f, 0, 0, 0.5f, 0});
    }
    EXPECT_FALSE(layer->AllowForceBackward(1));
  }
  // The target's own margin takes the negative sign.
  BlobSet bottom, top;
  Set(bottom.Add({}), {1, 2}, {0.25f, -2});
  Set(bottom.Add({}), {1}, {0});
  top.Add({});
  auto layer = MakeLayer("type: 'HingeLoss' hinge_loss_param { norm: L2 }", Engine::kReference);
  EXPECT_NEAR(RunLoss(*layer, bottom.vec(), top.vec()), 0.75f * 0.75f, 1e-6);
  ExpectDiff(*bottom[0], {-1.5f, 0});
}

TEST(LossCatalogueTest, MultinomialLogisticByHand) {
  BlobSet bottom, top;
  Set(bottom.Add({}), {2, 2, 1, 1}, {0.2f, 0.8f, 0.5f, 0.5f});
  Set(bottom.Add({}), {2, 1, 1, 1}, {1, 0});
  top.Add({});
  auto layer = MakeLayer("type: 'MultinomialLogisticLoss'", Engine::kReference);
  const float loss = RunLoss(*layer, bottom.vec(), top.vec());
  EXPECT_NEAR(loss, -(std::log(0.8f) + std::log(0.5f)) / 2, 1e-6);
  ExpectDiff(*bottom[0], {0, -0.625f, -1, 0});
  // A zero probability is clamped at 1e-20, as in Caffe.
  Set(bottom[0], {2, 2, 1, 1}, {1, 0, 0.5f, 0.5f});
  layer->Forward(bottom.vec(), top.vec());
  EXPECT_NEAR(top[0]->cpu_data()[0], (-std::log(1e-20f) - std::log(0.5f)) / 2, 1e-3);
}

// H = [[1, 0.5], [0, 2]]; scores (0, ln 3) give p = (0.25, 0.75).
const std::vector<float> kH = {1, 0.5f, 0, 2};

TEST(LossCatalogueTest, InfogainByHandWithThirdBottom) {
  BlobSet bottom, top;
  Set(bottom.Add({}), {1, 2}, {0, std::log(3.f)});
  Set(bottom.Add({}), {1}, {0});
  Set(bottom.Add({}), {1, 1, 2, 2}, kH);
  top.Add({});
  top.Add({});
  auto layer = MakeLayer("type: 'InfogainLoss'", Engine::kReference);
  const float loss = RunLoss(*layer, bottom.vec(), top.vec());
  EXPECT_NEAR(loss, -(std::log(0.25f) + 0.5f * std::log(0.75f)), 1e-6);
  // p * rowsum(H)[0] - H[0]: 0.25 * 1.5 - 1, 0.75 * 1.5 - 0.5.
  ExpectDiff(*bottom[0], {-0.625f, 0.625f});
  EXPECT_NEAR(top[1]->cpu_data()[1], 0.75f, 1e-6);
  EXPECT_FALSE(layer->AllowForceBackward(1));
  EXPECT_FALSE(layer->AllowForceBackward(2));
}

TEST(LossCatalogueTest, InfogainReadsTheSourceFileAndIgnoresLabels) {
  testing::TempDir dir;
  Blob h({1, 1, 2, 2});
  std::copy(kH.begin(), kH.end(), h.mutable_cpu_data());
  caffe::BlobProto proto;
  h.ToProto(&proto);
  ASSERT_TRUE(WriteBinaryProto(proto, dir / "h.binaryproto").ok());
  BlobSet bottom, top;
  // Two positions along axis 2 (inner 2): the second is ignored.
  Set(bottom.Add({}), {1, 2, 2}, {0, 0, std::log(3.f), 0});
  Set(bottom.Add({}), {1, 2}, {0, 5});
  top.Add({});
  auto layer = MakeLayer(
      "type: 'InfogainLoss' loss_param { ignore_label: 5 } "
      "infogain_loss_param { source: '" +
          (dir / "h.binaryproto") + "' }",
      Engine::kReference);
  const float loss = RunLoss(*layer, bottom.vec(), top.vec());
  EXPECT_NEAR(loss, -(std::log(0.25f) + 0.5f * std::log(0.75f)), 1e-6);
  ExpectDiff(*bottom[0], {-0.625f, 0, 0.625f, 0});
}

TEST(LossCatalogueTest, InfogainErrors) {
  BlobSet bottom, top;
  Set(bottom.Add({}), {2, 3}, {0, 0, 0, 0, 0, 0});
  Set(bottom.Add({}), {2}, {0, 1});
  top.Add({});
  EXPECT_EQ(MakeLayer("type: 'InfogainLoss'", Engine::kReference)
                ->SetUp(bottom.vec(), top.vec())
                .message(),
            "InfogainLoss needs the matrix H: infogain_loss_param.source or a third bottom");
  const std::string missing =
      MakeLayer("type: 'InfogainLoss' infogain_loss_param { source: '/nonexistent/h.bin' }",
                Engine::kReference)
          ->SetUp(bottom.vec(), top.vec())
          .message();
  EXPECT_NE(missing.find("infogain_loss_param.source: "), std::string::npos) << missing;
  EXPECT_NE(missing.find("/nonexistent/h.bin"), std::string::npos) << missing;
  Set(bottom.Add({}), {2, 2}, {1, 0, 0, 1});
  EXPECT_EQ(MakeLayer("type: 'InfogainLoss'", Engine::kReference)
                ->SetUp(bottom.vec(), top.vec())
                .message(),
            "the infogain matrix H (2 2 (4)) must be 3 x 3 for the classes of bottom 0 2 3 (6)");
  EXPECT_EQ(MakeLayer("type: 'InfogainLoss' infogain_loss_param { axis: 2 }", Engine::kReference)
                ->SetUp(bottom.vec(), top.vec())
                .message(),
            "infogain_loss_param.axis 2 is out of range for bottom 0 of shape 2 3 (6)");
  // A label outside H: NaN loss and the layer's runtime error (the net names the layer).
  Set(bottom[2], {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  Set(bottom[1], {2}, {0, 3});
  auto layer = MakeLayer("type: 'InfogainLoss'", Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  EXPECT_TRUE(std::isnan(layer->Forward(bottom.vec(), top.vec())));
  EXPECT_EQ(layer->RuntimeStatus().message(),
            "label 3 at index 1 of bottom 1 is outside [0, 3) and is not the ignore_label");
  Set(bottom[1], {2}, {0, 2});
  layer->Forward(bottom.vec(), top.vec());
  EXPECT_TRUE(layer->RuntimeStatus().ok());
}

TEST(LossCatalogueTest, BrokenLabelsAreRuntimeErrors) {
  for (const char* type : {"HingeLoss", "MultinomialLogisticLoss"}) {
    SCOPED_TRACE(type);
    BlobSet bottom, top;
    Set(bottom.Add({}), {2, 2}, {0.5f, 0.5f, 0.5f, 0.5f});
    Set(bottom.Add({}), {2}, {1, -1});
    top.Add({});
    auto layer = MakeLayer(std::string("type: '") + type + "'", Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    EXPECT_TRUE(std::isnan(layer->Forward(bottom.vec(), top.vec())));
    EXPECT_EQ(layer->RuntimeStatus().message(),
              "label -1 at index 1 of bottom 1 is outside [0, 2) and is not the ignore_label");
  }
}

TEST(LossCatalogueTest, ShapeErrors) {
  BlobSet bottom, top;
  Set(bottom.Add({}), {2, 3}, {});
  Set(bottom.Add({}), {2, 2}, {});
  Set(bottom.Add({}), {2}, {});
  top.Add({});
  EXPECT_EQ(MakeLayer("type: 'ContrastiveLoss'", Engine::kReference)
                ->SetUp(bottom.vec(), top.vec())
                .message(),
            "bottoms 0 and 1 must have the same shape, got 2 3 (6) and 2 2 (4)");
  BlobSet two;
  Set(two.Add({}), {2, 3}, {});
  Set(two.Add({}), {2, 2}, {});
  for (const char* type : {"HingeLoss", "MultinomialLogisticLoss"}) {
    EXPECT_EQ(MakeLayer(std::string("type: '") + type + "'", Engine::kReference)
                  ->SetUp(two.vec(), top.vec())
                  .message(),
              "bottom 1 must hold one label per sample (2), got shape 2 2 (4)");
  }
}

// Bottoms for a gradient check of each loss: scores first, then fixed labels.
struct LossCase {
  std::string proto;
  std::vector<std::vector<int>> shapes;
  std::function<void(const BlobVec&)> fill;
};

std::vector<LossCase> LossCases() {
  auto labels = [](Blob* b, int classes) {
    for (int64_t i = 0; i < b->count(); ++i)
      b->mutable_cpu_data()[i] = static_cast<float>(i % classes);
  };
  return {
      {"type: 'ContrastiveLoss' contrastive_loss_param { margin: 3 }",
       {{4, 3}, {4, 3}, {4}},
       [=](const BlobVec& b) {
         BlobSet::FillGaussian(b[0], 1, 0.5f);
         BlobSet::FillGaussian(b[1], 2, 0.5f);
         labels(b[2], 2);
       }},
      {"type: 'ContrastiveLoss' contrastive_loss_param { margin: 3 legacy_version: true }",
       {{4, 3}, {4, 3}, {4}},
       [=](const BlobVec& b) {
         BlobSet::FillGaussian(b[0], 1, 0.5f);
         BlobSet::FillGaussian(b[1], 2, 0.5f);
         labels(b[2], 2);
       }},
      {"type: 'HingeLoss'",
       {{4, 5}, {4}},
       [=](const BlobVec& b) {
         // Margins away from the kink at 0: |1 -+ x| >= 0.05.
         BlobSet::FillUniform(b[0], 3, -0.6f, 0.6f);
         labels(b[1], 5);
       }},
      {"type: 'HingeLoss' hinge_loss_param { norm: L2 }",
       {{4, 5}, {4}},
       [=](const BlobVec& b) {
         BlobSet::FillGaussian(b[0], 3, 2.f);
         labels(b[1], 5);
       }},
      {"type: 'MultinomialLogisticLoss'",
       {{4, 3}, {4}},
       [=](const BlobVec& b) {
         BlobSet::FillUniform(b[0], 4, 0.3f, 1.f);
         labels(b[1], 3);
       }},
      {"type: 'InfogainLoss' loss_param { ignore_label: 0 }",
       {{2, 3, 2}, {2, 2}, {3, 3}},
       [=](const BlobVec& b) {
         BlobSet::FillGaussian(b[0], 5, 1.f);
         labels(b[1], 3);
         BlobSet::FillUniform(b[2], 6, 0.f, 2.f);
       }},
  };
}

TEST(LossCatalogueTest, GradientsOnCpuEngines) {
  for (const LossCase& c : LossCases()) {
    for (Engine engine : {Engine::kReference, Engine::kFast}) {
      SCOPED_TRACE(c.proto);
      BlobSet bottom, top;
      for (const auto& s : c.shapes) bottom.Add(s);
      top.Add({});
      c.fill(bottom.vec());
      auto layer = MakeLayer(c.proto, engine);
      const Status s = layer->SetUp(bottom.vec(), top.vec());
      ASSERT_TRUE(s.ok()) << s.message();
      GradientCheckOptions options;
      options.step = 1e-3f;
      options.threshold = 2e-3f;
      CheckGradients(*layer, bottom.vec(), top.vec(), options);
    }
  }
}

TEST(LossCatalogueTest, GradientsOnGpu) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  for (const LossCase& c : LossCases()) {
    SCOPED_TRACE(c.proto);
    BlobSet bottom, top;
    for (const auto& s : c.shapes) bottom.Add(s);
    top.Add({});
    c.fill(bottom.vec());
    auto layer = MakeLayer(c.proto, Engine::kGpu);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    ASSERT_TRUE(layer->HasGpuPath());
    EXPECT_EQ(layer->Implementation(), "gpu");
    GradientCheckOptions options;
    options.step = 1e-3f;
    options.threshold = 2e-3f;
    CheckGradients(*layer, bottom.vec(), top.vec(), options);
    testing::ExpectEnginesAgree(c.proto, c.shapes, c.fill, 1e-4f, 1, Engine::kGpu);
  }
}

}  // namespace
}  // namespace pstrain

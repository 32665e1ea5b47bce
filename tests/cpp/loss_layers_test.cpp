// Tests of the loss layers (SoftmaxWithLoss, EuclideanLoss,
// SigmoidCrossEntropyLoss): losses hand-computed in double, every
// normalisation mode, ignore_label, spatial softmax, gradients against the
// closed form with loss weights 1 and 2 and against finite differences, and
// the exact error messages. None has a fast path: each runs the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/math_cpu.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "worker/layers/softmax_loss_layer.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::CheckGradients;
using testing::MakeLayer;

// A layer with its bottoms (filled from `values`) and tops.
struct Rig {
  BlobSet bottom;
  BlobSet top;
  std::unique_ptr<Layer> layer;
  Status setup;
};

std::unique_ptr<Rig> Build(const std::string& proto, const std::vector<std::vector<int>>& shapes,
                           const std::vector<std::vector<float>>& values, int num_tops = 1) {
  auto rig = std::make_unique<Rig>();
  for (size_t i = 0; i < shapes.size(); ++i) {
    Blob* b = rig->bottom.Add(shapes[i]);
    if (i < values.size()) {
      EXPECT_EQ(static_cast<int64_t>(values[i].size()), b->count()) << "bottom " << i;
      std::copy(values[i].begin(), values[i].end(), b->mutable_cpu_data());
    }
  }
  for (int t = 0; t < num_tops; ++t) rig->top.Add({});
  rig->layer = MakeLayer(proto, Engine::kReference);
  rig->setup = rig->layer->SetUp(rig->bottom.vec(), rig->top.vec());
  return rig;
}

std::string SetUpError(const std::string& proto, const std::vector<std::vector<int>>& shapes,
                       int num_tops = 1) {
  auto rig = Build(proto, shapes, {}, num_tops);
  EXPECT_FALSE(rig->setup.ok());
  return rig->setup.message();
}

// Runs Backward with top 0's diff (the loss weight) set to `weight`, after
// filling the bottom diffs with garbage (Backward must overwrite them).
void BackwardWithWeight(Rig& rig, float weight) {
  rig.top[0]->mutable_cpu_diff()[0] = weight;
  std::vector<bool> down;
  for (size_t i = 0; i < rig.bottom.size(); ++i) {
    down.push_back(rig.layer->AllowForceBackward(static_cast<int>(i)));
    if (down.back()) CpuSet(rig.bottom[i]->count(), 42.f, rig.bottom[i]->mutable_cpu_diff());
  }
  rig.layer->Backward(rig.top.vec(), down, rig.bottom.vec());
}

// Checks bottom `b`'s diff after Backward with loss weight `weight` against
// central differences of weight * loss.
void ExpectFiniteDifferenceGradient(Rig& rig, float weight, int b) {
  const BlobVec bottom = rig.bottom.vec();
  const BlobVec top = rig.top.vec();
  rig.layer->Forward(bottom, top);
  BackwardWithWeight(rig, weight);
  const std::vector<float> analytic(bottom[b]->cpu_diff(),
                                    bottom[b]->cpu_diff() + bottom[b]->count());
  const float step = 1e-2f;
  for (int64_t i = 0; i < bottom[b]->count(); ++i) {
    const float original = bottom[b]->cpu_data()[i];
    bottom[b]->mutable_cpu_data()[i] = original + step;
    rig.layer->Forward(bottom, top);
    const double plus = weight * static_cast<double>(top[0]->cpu_data()[0]);
    bottom[b]->mutable_cpu_data()[i] = original - step;
    rig.layer->Forward(bottom, top);
    const double minus = weight * static_cast<double>(top[0]->cpu_data()[0]);
    bottom[b]->mutable_cpu_data()[i] = original;
    EXPECT_NEAR(analytic[i], (plus - minus) / (2 * step), 2e-3)
        << "bottom " << b << " element " << i << " weight " << weight;
  }
}

// Softmax over `c` classes of x[k * stride] in double.
std::vector<double> Softmax(const float* x, int c, int stride) {
  double mx = x[0];
  for (int k = 1; k < c; ++k) mx = std::max<double>(mx, x[k * stride]);
  std::vector<double> p(c);
  double sum = 0;
  for (int k = 0; k < c; ++k) sum += p[k] = std::exp(x[k * stride] - mx);
  for (double& v : p) v /= sum;
  return p;
}

constexpr char kSoftmaxLoss[] = "type: 'SoftmaxWithLoss' ";

// ---------------------------------------------------------------- SoftmaxWithLoss

TEST(SoftmaxWithLossTest, ScalarLossTopWithDefaultWeightOne) {
  auto rig = Build(kSoftmaxLoss, {{2, 3}, {2}}, {{1, 2, 3, -1, 0, 5}, {2, 0}});
  ASSERT_TRUE(rig->setup.ok()) << rig->setup.message();
  EXPECT_TRUE(rig->layer->IsLoss());
  EXPECT_TRUE(rig->top[0]->shape().empty());
  EXPECT_EQ(rig->top[0]->count(), 1);
  EXPECT_EQ(rig->top[0]->cpu_diff()[0], 1.f);
  EXPECT_TRUE(rig->layer->AllowForceBackward(0));
  EXPECT_FALSE(rig->layer->AllowForceBackward(1));
}

TEST(SoftmaxWithLossTest, TwoSamplesThreeClasses) {
  const std::vector<float> x = {1, 2, 3, -1, 0, 5};
  auto rig = Build(kSoftmaxLoss, {{2, 3}, {2}}, {x, {2, 0}});
  ASSERT_TRUE(rig->setup.ok());
  const float returned = rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  const double expected =
      -(std::log(Softmax(&x[0], 3, 1)[2]) + std::log(Softmax(&x[3], 3, 1)[0])) / 2;
  EXPECT_NEAR(rig->top[0]->cpu_data()[0], expected, 1e-5);
  EXPECT_NEAR(returned, expected, 1e-5);
}

TEST(SoftmaxWithLossTest, LossWeightScalesReturnedLoss) {
  const std::vector<float> x = {1, 2, 3, -1, 0, 5};
  auto rig = Build(std::string(kSoftmaxLoss) + "loss_weight: 2", {{2, 3}, {2}}, {x, {2, 0}});
  ASSERT_TRUE(rig->setup.ok());
  EXPECT_EQ(rig->top[0]->cpu_diff()[0], 2.f);
  const float returned = rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_NEAR(returned, 2 * rig->top[0]->cpu_data()[0], 1e-6);
}

TEST(SoftmaxWithLossTest, StableForHugeLogits) {
  auto rig = Build(kSoftmaxLoss + std::string("loss_param { normalization: NONE }"), {{2, 3}, {2}},
                   {{1000, 0, -1000, 1000, 0, -1000}, {0, 2}});
  ASSERT_TRUE(rig->setup.ok());
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  // Label 0 has probability 1 (loss 0); label 2 underflows to 0: -log(FLT_MIN).
  EXPECT_NEAR(rig->top[0]->cpu_data()[0], -std::log(static_cast<double>(FLT_MIN)), 1e-3);
}

// N=2, C=3, H=1, W=2: outer 2, inner 2; ignore_label 1 hides one of 4 labels.
struct NormalizationCase {
  std::string loss_param;
  double divisor;
};

TEST(SoftmaxWithLossTest, EveryNormalizationModeWithIgnoreLabel) {
  const std::vector<float> x = {0.5f, -1, 2, 0, 1, 1, -0.5f, 3, 0.2f, 0.1f, 0, -2};
  const std::vector<float> labels = {2, 1, 0, 0};  // (n, w): (0,0) (0,1) (1,0) (1,1)
  double sum = 0;                                  // over the non-ignored positions
  for (int n = 0; n < 2; ++n) {
    for (int w = 0; w < 2; ++w) {
      const int label = static_cast<int>(labels[n * 2 + w]);
      if (label == 1) continue;
      sum -= std::log(Softmax(&x[n * 6 + w], 3, 2)[label]);
    }
  }
  const std::vector<NormalizationCase> cases = {
      {"ignore_label: 1", 3},  // VALID by default
      {"ignore_label: 1 normalization: VALID", 3},
      {"ignore_label: 1 normalization: FULL", 4},
      {"ignore_label: 1 normalization: BATCH_SIZE", 2},
      {"ignore_label: 1 normalization: NONE", 1},
      {"ignore_label: 1 normalize: false", 2},  // legacy: BATCH_SIZE
      {"ignore_label: 1 normalize: true", 3},   // legacy: VALID
      {"ignore_label: 1 normalize: false normalization: FULL", 4},
  };
  for (const auto& c : cases) {
    auto rig = Build(kSoftmaxLoss + std::string("loss_param { ") + c.loss_param + " }",
                     {{2, 3, 1, 2}, {2, 1, 1, 2}}, {x, labels});
    ASSERT_TRUE(rig->setup.ok()) << c.loss_param;
    rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
    EXPECT_NEAR(rig->top[0]->cpu_data()[0], sum / c.divisor, 1e-5) << c.loss_param;
  }
}

TEST(SoftmaxWithLossTest, AllIgnoredGivesZeroLossAndGradient) {
  auto rig = Build(kSoftmaxLoss + std::string("loss_param { ignore_label: 0 }"), {{2, 3}, {2}},
                   {{1, 2, 3, 4, 5, 6}, {0, 0}});
  ASSERT_TRUE(rig->setup.ok());
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_EQ(rig->top[0]->cpu_data()[0], 0.f);
  BackwardWithWeight(*rig, 1.f);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rig->bottom[0]->cpu_diff()[i], 0.f);
}

TEST(SoftmaxWithLossTest, SpatialLossAndProbabilityTop) {
  // N=2, C=3, H=2, W=2 with labels N x 1 x H x W.
  BlobSet scratch;
  Blob* x = scratch.Add({2, 3, 2, 2});
  BlobSet::FillGaussian(x, 7, 2.f);
  const std::vector<float> xv(x->cpu_data(), x->cpu_data() + x->count());
  const std::vector<float> labels = {0, 1, 2, 1, 2, 2, 0, 1};
  auto rig = Build(kSoftmaxLoss, {{2, 3, 2, 2}, {2, 1, 2, 2}}, {xv, labels}, 2);
  ASSERT_TRUE(rig->setup.ok()) << rig->setup.message();
  EXPECT_EQ(rig->top[1]->shape(), (std::vector<int>{2, 3, 2, 2}));
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  double loss = 0;
  for (int n = 0; n < 2; ++n) {
    for (int hw = 0; hw < 4; ++hw) {
      const std::vector<double> p = Softmax(&xv[n * 12 + hw], 3, 4);
      loss -= std::log(p[static_cast<int>(labels[n * 4 + hw])]);
      for (int c = 0; c < 3; ++c) {
        EXPECT_NEAR(rig->top[1]->cpu_data()[n * 12 + c * 4 + hw], p[c], 1e-6);
      }
    }
  }
  EXPECT_NEAR(rig->top[0]->cpu_data()[0], loss / 8, 1e-5);
}

TEST(SoftmaxWithLossTest, ClassAxisTwoAndNegativeAxis) {
  // Shape 2 x 2 x 3 with classes on axis 2 (= -1): outer 4, inner 1.
  const std::vector<float> x = {1, 0, -1, 2, 2, 0, 0.5f, 0.25f, 3, -1, 4, 1};
  const std::vector<float> labels = {0, 1, 2, 1};
  double loss = 0;
  for (int i = 0; i < 4; ++i)
    loss -= std::log(Softmax(&x[i * 3], 3, 1)[static_cast<int>(labels[i])]);
  for (const char* axis : {"2", "-1"}) {
    auto rig = Build(kSoftmaxLoss + std::string("softmax_param { axis: ") + axis + " }",
                     {{2, 2, 3}, {2, 2}}, {x, labels});
    ASSERT_TRUE(rig->setup.ok()) << rig->setup.message();
    rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
    EXPECT_NEAR(rig->top[0]->cpu_data()[0], loss / 4, 1e-5) << axis;
  }
}

TEST(SoftmaxWithLossTest, GradientMatchesClosedFormWithLossWeightOneAndTwo) {
  const std::vector<float> x = {0.5f, -1, 2, 0, 1, 1, -0.5f, 3, 0.2f, 0.1f, 0, -2};
  const std::vector<float> labels = {2, 1, 0, 0};
  for (float weight : {1.f, 2.f}) {
    auto rig = Build(kSoftmaxLoss + std::string("loss_param { ignore_label: 1 }"),
                     {{2, 3, 1, 2}, {2, 1, 1, 2}}, {x, labels});
    ASSERT_TRUE(rig->setup.ok());
    rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
    BackwardWithWeight(*rig, weight);
    for (int n = 0; n < 2; ++n) {
      for (int w = 0; w < 2; ++w) {
        const int label = static_cast<int>(labels[n * 2 + w]);
        const std::vector<double> p = Softmax(&x[n * 6 + w], 3, 2);
        for (int c = 0; c < 3; ++c) {
          const double expected =
              label == 1 ? 0.0 : weight * (p[c] - (c == label)) / 3;  // VALID: 3
          EXPECT_NEAR(rig->bottom[0]->cpu_diff()[n * 6 + c * 2 + w], expected, 1e-6)
              << "weight " << weight << " n " << n << " c " << c << " w " << w;
        }
      }
    }
  }
}

TEST(SoftmaxWithLossTest, FiniteDifferenceGradients) {
  for (const char* param :
       {"", "loss_param { ignore_label: 2 normalization: FULL }",
        "loss_param { normalization: BATCH_SIZE }", "softmax_param { axis: 2 }"}) {
    const bool axis2 = std::string(param).find("axis") != std::string::npos;
    const std::vector<int> labels = axis2 ? std::vector<int>{2, 3} : std::vector<int>{2, 1, 3};
    auto rig = Build(kSoftmaxLoss + std::string(param), {{2, 3, 3}, labels}, {});
    ASSERT_TRUE(rig->setup.ok()) << rig->setup.message();
    BlobSet::FillGaussian(rig->bottom[0], 11, 1.f);
    float* label = rig->bottom[1]->mutable_cpu_data();
    for (int i = 0; i < rig->bottom[1]->count(); ++i) label[i] = static_cast<float>(i % 3);
    CheckGradients(*rig->layer, rig->bottom.vec(), rig->top.vec());
    for (float weight : {1.f, 2.f}) ExpectFiniteDifferenceGradient(*rig, weight, 0);
  }
}

TEST(SoftmaxWithLossTest, OutOfRangeLabelMakesLossNanAndIsReported) {
  auto rig = Build(kSoftmaxLoss, {{2, 3}, {2}}, {{1, 2, 3, -1, 0, 5}, {2, 3}});
  ASSERT_TRUE(rig->setup.ok());
  auto* layer = static_cast<SoftmaxWithLossLayer*>(rig->layer.get());
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_TRUE(std::isnan(rig->top[0]->cpu_data()[0]));
  ASSERT_FALSE(layer->last_error().ok());
  EXPECT_EQ(layer->last_error().message(),
            "label 3 at index 1 of bottom 1 is outside [0, 3) and is not the ignore_label");
  BackwardWithWeight(*rig, 1.f);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(rig->bottom[0]->cpu_diff()[3 + c], 0.f);
  EXPECT_NE(rig->bottom[0]->cpu_diff()[2], 0.f);  // the valid sample still has a gradient

  rig->bottom[1]->mutable_cpu_data()[1] = -1;
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_EQ(layer->last_error().message(),
            "label -1 at index 1 of bottom 1 is outside [0, 3) and is not the ignore_label");
  rig->bottom[1]->mutable_cpu_data()[1] = 0;
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_TRUE(layer->last_error().ok());
  EXPECT_FALSE(std::isnan(rig->top[0]->cpu_data()[0]));
}

TEST(SoftmaxWithLossTest, ErrorMessages) {
  EXPECT_EQ(SetUpError(kSoftmaxLoss, {{2, 3, 2, 2}, {2, 1, 2, 3}}),
            "number of labels must match number of predictions: bottom 0 of shape 2 3 2 2 (24) "
            "with softmax axis 1 needs 8 labels, but bottom 1 has shape 2 1 2 3 (12)");
  EXPECT_EQ(SetUpError(kSoftmaxLoss, {{2, 3}, {3}}),
            "the data and label should have the same first dimension, got bottom 0 of shape "
            "2 3 (6) and bottom 1 of shape 3 (3)");
  EXPECT_EQ(SetUpError(kSoftmaxLoss + std::string("softmax_param { axis: 2 }"), {{2, 3}, {2}}),
            "softmax_param.axis 2 is out of range for bottom 0 of shape 2 3 (6)");
  EXPECT_EQ(SetUpError(kSoftmaxLoss, {{2, 3}, {2}}, 3),
            "SoftmaxWithLoss layer produces at most 2 tops, got 3");
  EXPECT_EQ(SetUpError(kSoftmaxLoss, {{2, 3}}), "SoftmaxWithLoss layer takes 2 bottoms, got 1");
}

// ---------------------------------------------------------------- EuclideanLoss

constexpr char kEuclidean[] = "type: 'EuclideanLoss' ";

TEST(EuclideanLossTest, HandComputedLoss) {
  auto rig = Build(kEuclidean, {{2, 2}, {2, 2}}, {{1, 2, 3, 4}, {0, 2, 1, 1}});
  ASSERT_TRUE(rig->setup.ok());
  EXPECT_TRUE(rig->top[0]->shape().empty());
  EXPECT_TRUE(rig->layer->AllowForceBackward(0));
  EXPECT_TRUE(rig->layer->AllowForceBackward(1));
  const float returned = rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_FLOAT_EQ(rig->top[0]->cpu_data()[0], 14.f / 4);  // (1 + 0 + 4 + 9) / (2 * 2)
  EXPECT_FLOAT_EQ(returned, 3.5f);
}

TEST(EuclideanLossTest, GradientsWithLossWeightOneAndTwo) {
  for (float weight : {1.f, 2.f}) {
    auto rig = Build(kEuclidean, {{2, 2}, {2, 1, 2}}, {{1, 2, 3, 4}, {0, 2, 1, 1}});
    ASSERT_TRUE(rig->setup.ok()) << rig->setup.message();
    rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
    BackwardWithWeight(*rig, weight);
    const float diff[4] = {1, 0, 2, 3};
    for (int i = 0; i < 4; ++i) {
      EXPECT_FLOAT_EQ(rig->bottom[0]->cpu_diff()[i], weight * diff[i] / 2);
      EXPECT_FLOAT_EQ(rig->bottom[1]->cpu_diff()[i], -weight * diff[i] / 2);
    }
  }
}

TEST(EuclideanLossTest, FiniteDifferenceGradientsBothBottoms) {
  auto rig = Build(kEuclidean, {{3, 2, 2}, {3, 4}}, {});
  ASSERT_TRUE(rig->setup.ok());
  BlobSet::FillGaussian(rig->bottom[0], 3);
  BlobSet::FillGaussian(rig->bottom[1], 4);
  CheckGradients(*rig->layer, rig->bottom.vec(), rig->top.vec());
  for (float weight : {1.f, 2.f}) {
    ExpectFiniteDifferenceGradient(*rig, weight, 0);
    ExpectFiniteDifferenceGradient(*rig, weight, 1);
  }
}

TEST(EuclideanLossTest, ErrorMessages) {
  EXPECT_EQ(SetUpError(kEuclidean, {{2, 3}, {2, 4}}),
            "inputs must have the same dimension: bottom 0 of shape 2 3 (6) and bottom 1 of "
            "shape 2 4 (8) differ in count(1)");
  EXPECT_EQ(SetUpError(kEuclidean, {{2, 3}, {3, 2}}),
            "the data and label should have the same first dimension, got bottom 0 of shape "
            "2 3 (6) and bottom 1 of shape 3 2 (6)");
  EXPECT_EQ(SetUpError(kEuclidean, {{2, 3}, {2, 3}}, 2),
            "EuclideanLoss layer produces 1 top, got 2");
}

// ---------------------------------------------------------------- SigmoidCrossEntropyLoss

constexpr char kSigmoidCe[] = "type: 'SigmoidCrossEntropyLoss' ";

double SigmoidCe(double x, double t) {
  const double s = 1 / (1 + std::exp(-x));
  return -(t * std::log(s) + (1 - t) * std::log(1 - s));
}

TEST(SigmoidCrossEntropyLossTest, EveryNormalizationModeWithIgnoreLabel) {
  // 2 x 3 logits; target -1 is ignored where ignore_label is -1.
  const std::vector<float> x = {0.5f, -1, 2, 0, 3, -0.25f};
  const std::vector<float> t = {1, 0, -1, 0.25f, 1, 0};
  double sum = 0;
  for (int i = 0; i < 6; ++i) {
    if (t[i] != -1) sum += SigmoidCe(x[i], t[i]);
  }
  const std::vector<NormalizationCase> cases = {
      {"ignore_label: -1", 2},  // BATCH_SIZE by default (Caffe's, not the proto's VALID)
      {"ignore_label: -1 normalization: VALID", 5},
      {"ignore_label: -1 normalization: FULL", 6},
      {"ignore_label: -1 normalization: BATCH_SIZE", 2},
      {"ignore_label: -1 normalization: NONE", 1},
      {"ignore_label: -1 normalize: false", 2},
      {"ignore_label: -1 normalize: true", 5},
  };
  for (const auto& c : cases) {
    auto rig = Build(kSigmoidCe + std::string("loss_param { ") + c.loss_param + " }",
                     {{2, 3}, {2, 3}}, {x, t});
    ASSERT_TRUE(rig->setup.ok()) << c.loss_param;
    rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
    EXPECT_NEAR(rig->top[0]->cpu_data()[0], sum / c.divisor, 1e-5) << c.loss_param;
  }
}

// Caffe's default for this layer is BATCH_SIZE (its LayerSetUp), so a net
// without loss_param (Caffe's examples/mnist/mnist_autoencoder.prototxt)
// divides the summed loss by the batch, not by the 2 x 2 outputs; the
// gradient is scaled the same way.
TEST(SigmoidCrossEntropyLossTest, NoLossParamDividesByBatchSize) {
  const std::vector<float> x = {0.5f, -1, 2, 0};
  const std::vector<float> t = {1, 0, 0, 1};
  double sum = 0;
  for (int i = 0; i < 4; ++i) sum += SigmoidCe(x[i], t[i]);
  auto rig = Build(kSigmoidCe, {{2, 2}, {2, 2}}, {x, t});
  ASSERT_TRUE(rig->setup.ok());
  EXPECT_FALSE(rig->layer->AllowForceBackward(1));
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_NEAR(rig->top[0]->cpu_data()[0], sum / 2, 1e-6);
  rig->top[0]->mutable_cpu_diff()[0] = 1;
  rig->layer->Backward(rig->top.vec(), {true, false}, rig->bottom.vec());
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(rig->bottom[0]->cpu_diff()[i], (1 / (1 + std::exp(-x[i])) - t[i]) / 2, 1e-6) << i;
  }
}

TEST(SigmoidCrossEntropyLossTest, StableForHugeLogits) {
  auto rig = Build(kSigmoidCe + std::string("loss_param { normalization: NONE }"), {{1, 4}, {1, 4}},
                   {{100, -100, 100, -100}, {0, 1, 1, 0}});
  ASSERT_TRUE(rig->setup.ok());
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_NEAR(rig->top[0]->cpu_data()[0], 200.0, 1e-3);
}

TEST(SigmoidCrossEntropyLossTest, GradientsWithLossWeightOneAndTwo) {
  const std::vector<float> x = {0.5f, -1, 2, 0, 3, -0.25f};
  const std::vector<float> t = {1, 0, -1, 0.25f, 1, 0};
  for (float weight : {1.f, 2.f}) {
    auto rig = Build(kSigmoidCe + std::string("loss_param { ignore_label: -1 }"), {{2, 3}, {2, 3}},
                     {x, t});
    ASSERT_TRUE(rig->setup.ok());
    rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
    BackwardWithWeight(*rig, weight);
    for (int i = 0; i < 6; ++i) {
      // divided by the batch (2): Caffe's default for this layer
      const double expected = t[i] == -1 ? 0.0 : weight * (1 / (1 + std::exp(-x[i])) - t[i]) / 2;
      EXPECT_NEAR(rig->bottom[0]->cpu_diff()[i], expected, 1e-6) << i;
    }
  }
}

TEST(SigmoidCrossEntropyLossTest, FiniteDifferenceGradients) {
  auto rig =
      Build(kSigmoidCe + std::string("loss_param { ignore_label: -1 }"), {{2, 3, 2}, {2, 6}}, {});
  ASSERT_TRUE(rig->setup.ok());
  BlobSet::FillGaussian(rig->bottom[0], 5, 2.f);
  BlobSet::FillUniform(rig->bottom[1], 6, 0.f, 1.f);
  rig->bottom[1]->mutable_cpu_data()[4] = -1;
  CheckGradients(*rig->layer, rig->bottom.vec(), rig->top.vec());
  for (float weight : {1.f, 2.f}) ExpectFiniteDifferenceGradient(*rig, weight, 0);
}

TEST(SigmoidCrossEntropyLossTest, ErrorMessages) {
  EXPECT_EQ(SetUpError(kSigmoidCe, {{2, 3}, {2, 4}}),
            "SigmoidCrossEntropyLoss inputs must have the same count: bottom 0 of shape 2 3 (6), "
            "bottom 1 of shape 2 4 (8)");
  EXPECT_EQ(SetUpError(kSigmoidCe, {{2, 3}, {3, 2}}),
            "the data and label should have the same first dimension, got bottom 0 of shape "
            "2 3 (6) and bottom 1 of shape 3 2 (6)");
}

}  // namespace
}  // namespace pstrain

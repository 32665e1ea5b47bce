// Tests of the Accuracy layer: top-1 and top-k against hand-counted hits,
// ties, ignore_label, per-class accuracy, a spatial class axis, out-of-range
// labels, the error messages, and that it is not a loss and has no backward.
#include "worker/layers/accuracy_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::MakeLayer;

struct Rig {
  BlobSet bottom;
  BlobSet top;
  std::unique_ptr<Layer> layer;
  Status setup;
};

std::unique_ptr<Rig> Build(const std::string& param, const std::vector<int>& score_shape,
                           const std::vector<int>& label_shape, const std::vector<float>& scores,
                           const std::vector<float>& labels, int num_tops = 1) {
  auto rig = std::make_unique<Rig>();
  Blob* s = rig->bottom.Add(score_shape);
  Blob* l = rig->bottom.Add(label_shape);
  if (static_cast<int64_t>(scores.size()) == s->count()) {
    std::copy(scores.begin(), scores.end(), s->mutable_cpu_data());
  }
  if (static_cast<int64_t>(labels.size()) == l->count()) {
    std::copy(labels.begin(), labels.end(), l->mutable_cpu_data());
  }
  for (int t = 0; t < num_tops; ++t) rig->top.Add({});
  rig->layer = MakeLayer("type: 'Accuracy' " + param, Engine::kReference);
  rig->setup = rig->layer->SetUp(rig->bottom.vec(), rig->top.vec());
  return rig;
}

// 4 samples x 4 classes. Rank of the true class (0 = best):
//   sample 0 label 1: rank 0;  sample 1 label 3: rank 1;
//   sample 2 label 0: rank 2;  sample 3 label 2: rank 3.
const std::vector<float> kScores = {0.1f, 0.9f, 0.0f,  0.3f,  //
                                    0.5f, 0.1f, 0.2f,  0.4f,  //
                                    0.2f, 0.7f, 0.1f,  0.6f,  //
                                    0.3f, 0.2f, 0.05f, 0.4f};
const std::vector<float> kLabels = {1, 3, 0, 2};

TEST(AccuracyTest, TopOneAndNotALoss) {
  auto rig = Build("", {4, 4}, {4}, kScores, kLabels);
  ASSERT_TRUE(rig->setup.ok()) << rig->setup.message();
  EXPECT_FALSE(rig->layer->IsLoss());
  EXPECT_FALSE(rig->layer->AllowForceBackward(0));
  EXPECT_FALSE(rig->layer->AllowForceBackward(1));
  EXPECT_TRUE(rig->top[0]->shape().empty());
  EXPECT_EQ(rig->layer->Forward(rig->bottom.vec(), rig->top.vec()), 0.f);  // weight 0
  EXPECT_FLOAT_EQ(rig->top[0]->cpu_data()[0], 0.25f);
}

TEST(AccuracyTest, TopK) {
  const float expected[] = {0.25f, 0.5f, 0.75f, 1.f};
  for (int k = 1; k <= 4; ++k) {
    auto rig =
        Build("accuracy_param { top_k: " + std::to_string(k) + " }", {4, 4}, {4}, kScores, kLabels);
    ASSERT_TRUE(rig->setup.ok());
    rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
    EXPECT_FLOAT_EQ(rig->top[0]->cpu_data()[0], expected[k - 1]) << "top_k " << k;
  }
}

TEST(AccuracyTest, TiesCountAgainstTheTrueClass) {
  // Sample 0: label 0 ties with class 1 -> wrong at top_k 1, right at top_k 2.
  const std::vector<float> scores = {0.5f, 0.5f, 0.f, 1.f, 0.f, 0.f};
  for (int k : {1, 2}) {
    auto rig =
        Build("accuracy_param { top_k: " + std::to_string(k) + " }", {2, 3}, {2}, scores, {0, 0});
    ASSERT_TRUE(rig->setup.ok());
    rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
    EXPECT_FLOAT_EQ(rig->top[0]->cpu_data()[0], k == 1 ? 0.5f : 1.f);
  }
}

TEST(AccuracyTest, IgnoreLabel) {
  // Ignoring label 3 drops sample 1: 1 right of 3.
  auto rig = Build("accuracy_param { ignore_label: 3 }", {4, 4}, {4}, kScores, kLabels);
  ASSERT_TRUE(rig->setup.ok());
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_FLOAT_EQ(rig->top[0]->cpu_data()[0], 1.f / 3);
  // Everything ignored: 0.
  auto all = Build("accuracy_param { ignore_label: 1 }", {2, 3}, {2}, {1, 2, 3, 4, 5, 6}, {1, 1});
  ASSERT_TRUE(all->setup.ok());
  all->layer->Forward(all->bottom.vec(), all->top.vec());
  EXPECT_EQ(all->top[0]->cpu_data()[0], 0.f);
}

TEST(AccuracyTest, PerClassTop) {
  // 6 samples x 3 classes; labels 0,0,1,1,1,2 (class 2 seen once, wrong).
  const std::vector<float> scores = {9, 0, 0, 0, 9, 0, 0, 9, 0, 9, 0, 0, 0, 9, 0, 9, 0, 0};
  auto rig = Build("accuracy_param { top_k: 1 }", {6, 3}, {6}, scores, {0, 0, 1, 1, 1, 2}, 2);
  ASSERT_TRUE(rig->setup.ok()) << rig->setup.message();
  EXPECT_EQ(rig->top[1]->shape(), std::vector<int>{3});
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_FLOAT_EQ(rig->top[0]->cpu_data()[0], 3.f / 6);
  EXPECT_FLOAT_EQ(rig->top[1]->cpu_data()[0], 0.5f);
  EXPECT_FLOAT_EQ(rig->top[1]->cpu_data()[1], 2.f / 3);
  EXPECT_FLOAT_EQ(rig->top[1]->cpu_data()[2], 0.f);
  // A class never seen reads 0, and a second Forward starts from scratch.
  std::vector<float> labels = {0, 0, 0, 0, 0, 0};
  std::copy(labels.begin(), labels.end(), rig->bottom[1]->mutable_cpu_data());
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_FLOAT_EQ(rig->top[1]->cpu_data()[0], 3.f / 6);
  EXPECT_FLOAT_EQ(rig->top[1]->cpu_data()[1], 0.f);
  EXPECT_FLOAT_EQ(rig->top[1]->cpu_data()[2], 0.f);
}

TEST(AccuracyTest, SpatialClassAxis) {
  // N=1, C=2, H=1, W=3: scores for positions w=0..2 are (c0, c1) = (1,0) (0,1) (2,3).
  const std::vector<float> scores = {1, 0, 2, 0, 1, 3};
  auto rig = Build("", {1, 2, 1, 3}, {1, 1, 1, 3}, scores, {0, 0, 1});
  ASSERT_TRUE(rig->setup.ok()) << rig->setup.message();
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_FLOAT_EQ(rig->top[0]->cpu_data()[0], 2.f / 3);
  // The same three positions laid out with the class axis last (3 x 2).
  auto last = Build("accuracy_param { axis: -1 }", {3, 2}, {3}, {1, 0, 0, 1, 2, 3}, {0, 0, 1});
  ASSERT_TRUE(last->setup.ok());
  last->layer->Forward(last->bottom.vec(), last->top.vec());
  EXPECT_FLOAT_EQ(last->top[0]->cpu_data()[0], 2.f / 3);
}

TEST(AccuracyTest, BackwardLeavesBottomsAlone) {
  auto rig = Build("", {4, 4}, {4}, kScores, kLabels);
  ASSERT_TRUE(rig->setup.ok());
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  rig->bottom[0]->mutable_cpu_diff()[0] = 7.f;
  rig->layer->Backward(rig->top.vec(), {true, false}, rig->bottom.vec());
  EXPECT_EQ(rig->bottom[0]->cpu_diff()[0], 7.f);
}

TEST(AccuracyTest, OutOfRangeLabelGivesNanAndIsReported) {
  auto rig = Build("", {4, 4}, {4}, kScores, {1, 3, 4, 2});
  ASSERT_TRUE(rig->setup.ok());
  auto* layer = static_cast<AccuracyLayer*>(rig->layer.get());
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_TRUE(std::isnan(rig->top[0]->cpu_data()[0]));
  EXPECT_EQ(layer->last_error().message(),
            "label 4 at index 2 of bottom 1 is outside [0, 4) and is not the ignore_label");
  rig->bottom[1]->mutable_cpu_data()[2] = 0;
  rig->layer->Forward(rig->bottom.vec(), rig->top.vec());
  EXPECT_TRUE(layer->last_error().ok());
  EXPECT_FLOAT_EQ(rig->top[0]->cpu_data()[0], 0.25f);
}

std::string SetUpError(const std::string& param, const std::vector<int>& score_shape,
                       const std::vector<int>& label_shape, int num_tops = 1) {
  auto rig = Build(param, score_shape, label_shape, {}, {}, num_tops);
  EXPECT_FALSE(rig->setup.ok());
  return rig->setup.message();
}

TEST(AccuracyTest, ErrorMessages) {
  EXPECT_EQ(SetUpError("", {2, 3, 2}, {2, 3}),
            "number of labels must match number of predictions: bottom 0 of shape 2 3 2 (12) with "
            "class axis 1 needs 4 labels, but bottom 1 has shape 2 3 (6)");
  EXPECT_EQ(SetUpError("accuracy_param { top_k: 4 }", {2, 3}, {2}),
            "top_k 4 must be less than or equal to the number of classes 3");
  EXPECT_EQ(SetUpError("accuracy_param { top_k: 0 }", {2, 3}, {2}), "top_k must be at least 1");
  EXPECT_EQ(SetUpError("accuracy_param { axis: -3 }", {2, 3}, {2}),
            "accuracy_param.axis -3 is out of range for bottom 0 of shape 2 3 (6)");
  EXPECT_EQ(SetUpError("", {2, 3}, {2}, 3), "Accuracy layer produces at most 2 tops, got 3");
}

}  // namespace
}  // namespace pstrain

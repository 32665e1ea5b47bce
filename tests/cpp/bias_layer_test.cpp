#include <gtest/gtest.h>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::MakeLayer;

std::unique_ptr<Layer> MakeBias(const std::string& bias_param) {
  return MakeLayer("name: 'bias' type: 'Bias' bias_param { " + bias_param + " }",
                   Engine::kReference);
}

void FillRange(Blob* blob) {
  for (int64_t i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = static_cast<float>(i);
}

std::string SetUpError(const std::string& bias_param, const std::vector<std::vector<int>>& shapes) {
  BlobSet b, t;
  for (const auto& shape : shapes) b.Add(shape);
  t.Add({});
  auto layer = MakeBias(bias_param);
  Status s = layer->SetUp(b.vec(), t.vec());
  return s.ok() ? "ok" : s.message();
}

TEST(BiasLayerTest, Errors) {
  EXPECT_EQ(SetUpError("axis: 3", {{2, 3}}),
            "axis 3 is out of range for bottom 0 of shape 2 3 (6)");
  EXPECT_EQ(SetUpError("num_axes: -2", {{2, 3}}),
            "num_axes must be non-negative, or -1 to extend to the end of bottom 0, got -2");
  EXPECT_EQ(SetUpError("axis: 1 num_axes: 2", {{2, 3}}),
            "bias blob's shape extends past bottom 0's shape when applied starting with bottom 0 "
            "axis 1");
  EXPECT_EQ(SetUpError("axis: 1", {{2, 3, 4}, {3, 5}}),
            "dimension mismatch between bottom 0 axis 2 (4) and bias axis 1 (5)");
  EXPECT_EQ(SetUpError("axis: 2", {{2, 3, 4}, {4, 1}}),
            "bias blob's shape extends past bottom 0's shape when applied starting with bottom 0 "
            "axis 2");
  EXPECT_EQ(SetUpError("", {{2, 3, 4}, {3}, {3}}), "Bias layer takes at most 2 bottoms, got 3");
}

TEST(BiasLayerTest, LearnedBiasShapesAndFiller) {
  BlobSet b, t;
  b.Add({2, 3, 4, 5});
  t.Add({});
  auto layer = MakeBias("");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  ASSERT_EQ(layer->blobs().size(), 1u);
  EXPECT_EQ(layer->blobs()[0]->shape(), std::vector<int>({3}));
  EXPECT_EQ(layer->blobs()[0]->cpu_data()[2], 0.f);
  auto all = MakeBias("axis: -2 num_axes: -1 filler { type: 'constant' value: 0.5 }");
  ASSERT_TRUE(all->SetUp(b.vec(), t.vec()).ok());
  EXPECT_EQ(all->blobs()[0]->shape(), std::vector<int>({4, 5}));
  EXPECT_EQ(all->blobs()[0]->cpu_data()[19], 0.5f);
}

TEST(BiasLayerTest, ForwardLearnedByHand) {
  BlobSet b, t;
  FillRange(b.Add({2, 3, 2}));
  t.Add({});
  auto layer = MakeBias("");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  float* bias = layer->blobs()[0]->mutable_cpu_data();
  bias[0] = 10, bias[1] = 20, bias[2] = 30;
  layer->Forward(b.vec(), t.vec());
  const float expected[12] = {10, 11, 22, 23, 34, 35, 16, 17, 28, 29, 40, 41};
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(t[0]->cpu_data()[i], expected[i]) << i;
}

TEST(BiasLayerTest, ForwardTwoBottomsAndScalar) {
  BlobSet b, t;
  FillRange(b.Add({2, 2, 2}));
  Blob* bias = b.Add({2, 2});
  t.Add({});
  for (int i = 0; i < 4; ++i) bias->mutable_cpu_data()[i] = 100.f * (i + 1);
  auto layer = MakeBias("axis: 1");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  layer->Forward(b.vec(), t.vec());
  const float expected[8] = {100, 201, 302, 403, 104, 205, 306, 407};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(t[0]->cpu_data()[i], expected[i]) << i;
  // A scalar bias ignores axis (3 would be out of range otherwise).
  bias->Reshape({});
  bias->mutable_cpu_data()[0] = -1.f;
  auto scalar = MakeBias("axis: 3");
  ASSERT_TRUE(scalar->SetUp(b.vec(), t.vec()).ok());
  scalar->Forward(b.vec(), t.vec());
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(t[0]->cpu_data()[i], i - 1.f) << i;
}

TEST(BiasLayerTest, BackwardSumsAndAccumulatesParamDiff) {
  BlobSet b, t;
  FillRange(b.Add({2, 3, 2}));
  t.Add({});
  auto layer = MakeBias("");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  layer->Forward(b.vec(), t.vec());
  for (int i = 0; i < 12; ++i) t[0]->mutable_cpu_diff()[i] = static_cast<float>(i);
  layer->blobs()[0]->SetDiffZero();
  layer->Backward(t.vec(), {true}, b.vec());
  layer->Backward(t.vec(), {true}, b.vec());
  // Channel d collects diffs 2d, 2d+1, 6+2d, 7+2d, twice.
  const float sums[3] = {14, 22, 30};
  for (int d = 0; d < 3; ++d) EXPECT_FLOAT_EQ(layer->blobs()[0]->cpu_diff()[d], 2 * sums[d]);
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(b[0]->cpu_diff()[i], static_cast<float>(i));
}

TEST(BiasLayerTest, InPlace) {
  BlobSet b;
  FillRange(b.Add({2, 3}));
  auto layer = MakeBias("filler { type: 'constant' value: 1 }");
  ASSERT_TRUE(layer->SetUp(b.vec(), b.vec()).ok());
  layer->Forward(b.vec(), b.vec());
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(b[0]->cpu_data()[i], i + 1.f);
  for (int i = 0; i < 6; ++i) b[0]->mutable_cpu_diff()[i] = 1.f;
  layer->blobs()[0]->SetDiffZero();
  layer->Backward(b.vec(), {true}, b.vec());
  EXPECT_FLOAT_EQ(layer->blobs()[0]->cpu_diff()[1], 2.f);
  EXPECT_FLOAT_EQ(b[0]->cpu_diff()[4], 1.f);
}

TEST(BiasLayerTest, GradientLearned) {
  BlobSet b, t;
  BlobSet::FillGaussian(b.Add({2, 3, 2, 2}), 1);
  t.Add({});
  auto layer = MakeBias("axis: 1 num_axes: 2 filler { type: 'gaussian' }");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  testing::CheckGradients(*layer, b.vec(), t.vec());
}

TEST(BiasLayerTest, GradientTwoBottoms) {
  BlobSet b, t;
  BlobSet::FillGaussian(b.Add({2, 3, 4}), 2);
  BlobSet::FillGaussian(b.Add({4}), 3);
  t.Add({});
  auto layer = MakeBias("axis: -1");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  testing::CheckGradients(*layer, b.vec(), t.vec());
}

}  // namespace
}  // namespace pstrain

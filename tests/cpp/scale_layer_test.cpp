#include <gtest/gtest.h>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::MakeLayer;

std::unique_ptr<Layer> MakeScale(const std::string& scale_param) {
  return MakeLayer("name: 'scale' type: 'Scale' scale_param { " + scale_param + " }",
                   Engine::kReference);
}

void FillRange(Blob* blob) {
  for (int64_t i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = static_cast<float>(i);
}

std::string SetUpError(const std::string& scale_param,
                       const std::vector<std::vector<int>>& shapes) {
  BlobSet b, t;
  for (const auto& shape : shapes) b.Add(shape);
  t.Add({});
  auto layer = MakeScale(scale_param);
  Status s = layer->SetUp(b.vec(), t.vec());
  return s.ok() ? "ok" : s.message();
}

TEST(ScaleLayerTest, Errors) {
  EXPECT_EQ(SetUpError("axis: -3", {{2, 3}}),
            "axis -3 is out of range for bottom 0 of shape 2 3 (6)");
  EXPECT_EQ(SetUpError("num_axes: -2", {{2, 3}}),
            "num_axes must be non-negative, or -1 to extend to the end of bottom 0, got -2");
  EXPECT_EQ(SetUpError("axis: 1 num_axes: 3", {{2, 3, 4}}),
            "scale blob's shape extends past bottom 0's shape when applied starting with bottom 0 "
            "axis 1");
  EXPECT_EQ(SetUpError("", {{2, 3, 4}, {4}}),
            "dimension mismatch between bottom 0 axis 1 (3) and scale axis 0 (4)");
  EXPECT_EQ(SetUpError("filler { type: 'uniform' min: 1 max: 0 }", {{2, 3}}),
            "uniform filler needs min <= max");
  EXPECT_EQ(SetUpError("bias_term: true bias_filler { type: 'gaussian' std: -1 }", {{2, 3}}),
            "gaussian filler needs std >= 0");
  EXPECT_EQ(SetUpError("", {}), "Scale layer takes at least 1 bottom, got 0");
}

TEST(ScaleLayerTest, DefaultIsIdentityWithoutBias) {
  BlobSet b, t;
  FillRange(b.Add({2, 3, 2}));
  t.Add({});
  auto layer = MakeScale("");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  ASSERT_EQ(layer->blobs().size(), 1u);
  EXPECT_EQ(layer->blobs()[0]->shape(), std::vector<int>({3}));
  layer->Forward(b.vec(), t.vec());
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(t[0]->cpu_data()[i], static_cast<float>(i));
}

TEST(ScaleLayerTest, ForwardLearnedWithBiasByHand) {
  BlobSet b, t;
  FillRange(b.Add({2, 3, 2}));
  t.Add({});
  auto layer = MakeScale("bias_term: true bias_filler { type: 'constant' value: 0.5 }");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  ASSERT_EQ(layer->blobs().size(), 2u);
  EXPECT_EQ(layer->blobs()[1]->shape(), std::vector<int>({3}));
  float* scale = layer->blobs()[0]->mutable_cpu_data();
  scale[0] = 1, scale[1] = 2, scale[2] = -3;
  layer->Forward(b.vec(), t.vec());
  const float expected[12] = {0.5, 1.5, 4.5, 6.5, -11.5, -14.5, 6.5, 7.5, 16.5, 18.5, -29.5, -32.5};
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(t[0]->cpu_data()[i], expected[i]) << i;
}

TEST(ScaleLayerTest, ForwardTwoBottomsTakesAxesFromBottomOne) {
  BlobSet b, t;
  FillRange(b.Add({2, 2, 2}));
  Blob* scale = b.Add({2, 2});
  t.Add({});
  for (int i = 0; i < 4; ++i) scale->mutable_cpu_data()[i] = static_cast<float>(i + 1);
  auto layer = MakeScale("bias_term: true");  // num_axes 1 is not used with two bottoms
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  ASSERT_EQ(layer->blobs().size(), 1u);
  EXPECT_EQ(layer->blobs()[0]->shape(), std::vector<int>({2, 2}));
  layer->blobs()[0]->mutable_cpu_data()[3] = 1.f;
  layer->Forward(b.vec(), t.vec());
  const float expected[8] = {0, 2, 6, 13, 4, 10, 18, 29};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(t[0]->cpu_data()[i], expected[i]) << i;
}

TEST(ScaleLayerTest, ScalarScaleIgnoresAxis) {
  BlobSet b, t;
  FillRange(b.Add({2, 3}));
  b.Add({})->mutable_cpu_data()[0] = 3.f;
  t.Add({});
  auto layer = MakeScale("axis: 5");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  layer->Forward(b.vec(), t.vec());
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(t[0]->cpu_data()[i], 3.f * i);
}

TEST(ScaleLayerTest, BackwardByHand) {
  BlobSet b, t;
  FillRange(b.Add({2, 2}));  // x = 0 1 | 2 3
  t.Add({});
  auto layer = MakeScale("bias_term: true");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  layer->blobs()[0]->mutable_cpu_data()[0] = 2.f;
  layer->blobs()[0]->mutable_cpu_data()[1] = -1.f;
  layer->Forward(b.vec(), t.vec());
  const float dy[4] = {1, 2, 3, 4};
  for (int i = 0; i < 4; ++i) t[0]->mutable_cpu_diff()[i] = dy[i];
  for (auto& p : layer->blobs()) p->SetDiffZero();
  layer->Backward(t.vec(), {true}, b.vec());
  layer->Backward(t.vec(), {true}, b.vec());  // param diffs accumulate
  EXPECT_FLOAT_EQ(layer->blobs()[0]->cpu_diff()[0], 2 * (1 * 0 + 3 * 2.f));
  EXPECT_FLOAT_EQ(layer->blobs()[0]->cpu_diff()[1], 2 * (2 * 1 + 4 * 3.f));
  EXPECT_FLOAT_EQ(layer->blobs()[1]->cpu_diff()[0], 2 * 4.f);
  EXPECT_FLOAT_EQ(layer->blobs()[1]->cpu_diff()[1], 2 * 6.f);
  const float dx[4] = {2, -2, 6, -4};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(b[0]->cpu_diff()[i], dx[i]) << i;
}

TEST(ScaleLayerTest, InPlaceMatchesOutOfPlace) {
  BlobSet b, t, io;
  BlobSet::FillGaussian(b.Add({2, 3, 2}), 4);
  t.Add({});
  io.Add({2, 3, 2})->CopyFrom(*b[0]);
  auto out_of_place = MakeScale("bias_term: true filler { type: 'gaussian' }");
  auto in_place = MakeScale("bias_term: true filler { type: 'gaussian' }");
  ASSERT_TRUE(out_of_place->SetUp(b.vec(), t.vec()).ok());
  ASSERT_TRUE(in_place->SetUp(io.vec(), io.vec()).ok());
  out_of_place->Forward(b.vec(), t.vec());
  in_place->Forward(io.vec(), io.vec());
  testing::ExpectBlobsNear(t[0]->cpu_data(), io[0]->cpu_data(), 12, 1e-6f, "top");
  for (int i = 0; i < 12; ++i)
    t[0]->mutable_cpu_diff()[i] = io[0]->mutable_cpu_diff()[i] = 0.5f * i;
  for (Layer* l : {out_of_place.get(), in_place.get()}) {
    for (auto& p : l->blobs()) p->SetDiffZero();
  }
  out_of_place->Backward(t.vec(), {true}, b.vec());
  in_place->Backward(io.vec(), {true}, io.vec());
  testing::ExpectBlobsNear(b[0]->cpu_diff(), io[0]->cpu_diff(), 12, 1e-6f, "bottom diff");
  for (int p = 0; p < 2; ++p) {
    testing::ExpectBlobsNear(out_of_place->blobs()[p]->cpu_diff(), in_place->blobs()[p]->cpu_diff(),
                             3, 1e-6f, "param diff " + std::to_string(p));
  }
}

TEST(ScaleLayerTest, GradientLearnedWithBias) {
  BlobSet b, t;
  BlobSet::FillGaussian(b.Add({2, 3, 2, 2}), 5);
  t.Add({});
  auto layer = MakeScale(
      "axis: 1 num_axes: -1 bias_term: true filler { type: 'gaussian' } "
      "bias_filler { type: 'gaussian' }");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  EXPECT_EQ(layer->blobs()[0]->shape(), std::vector<int>({3, 2, 2}));
  testing::CheckGradients(*layer, b.vec(), t.vec());
}

TEST(ScaleLayerTest, GradientTwoBottomsWithBias) {
  BlobSet b, t;
  BlobSet::FillGaussian(b.Add({2, 3, 4}), 6);
  BlobSet::FillGaussian(b.Add({2, 3}), 7);
  t.Add({});
  auto layer = MakeScale("axis: 0 bias_term: true bias_filler { type: 'gaussian' }");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  testing::CheckGradients(*layer, b.vec(), t.vec());
}

}  // namespace
}  // namespace pstrain

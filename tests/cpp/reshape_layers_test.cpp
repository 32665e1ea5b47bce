// Reshape, Flatten and Split: layers whose tops share the bottom's storage.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::CheckGradients;
using testing::MakeLayer;

// Sets up `prototxt` on one bottom of `shape`; returns the status and the top shape.
Status SetUpOne(const std::string& prototxt, const std::vector<int>& shape,
                std::vector<int>* top_shape = nullptr) {
  BlobSet bottom, top;
  bottom.Add(shape);
  top.Add({});
  Status s = MakeLayer(prototxt, Engine::kReference)->SetUp(bottom.vec(), top.vec());
  if (top_shape != nullptr) *top_shape = top[0]->shape();
  return s;
}

std::vector<int> ReshapedTo(const std::string& param, const std::vector<int>& shape) {
  std::vector<int> top_shape;
  Status s = SetUpOne("type: 'Reshape' reshape_param { " + param + " }", shape, &top_shape);
  EXPECT_TRUE(s.ok()) << param << ": " << s.message();
  return top_shape;
}

using Shape = std::vector<int>;

TEST(ReshapeLayerTest, CopyAndInferRules) {
  const Shape in = {2, 3, 4, 5};
  EXPECT_EQ(ReshapedTo("shape { dim: 0 dim: -1 }", in), (Shape{2, 60}));
  EXPECT_EQ(ReshapedTo("shape { dim: 0 dim: 0 dim: -1 }", in), (Shape{2, 3, 20}));
  EXPECT_EQ(ReshapedTo("shape { dim: -1 }", in), (Shape{120}));
  EXPECT_EQ(ReshapedTo("shape { dim: 6 dim: -1 dim: 0 dim: 5 }", in), (Shape{6, 1, 4, 5}));
  EXPECT_EQ(ReshapedTo("shape { dim: 4 dim: 0 dim: 10 }", in), (Shape{4, 3, 10}));
  EXPECT_EQ(ReshapedTo("shape { dim: 12 } axis: 1 num_axes: 2", in), (Shape{2, 12, 5}));
  EXPECT_EQ(ReshapedTo("shape { dim: -1 } axis: 1 num_axes: 2", in), (Shape{2, 12, 5}));
  EXPECT_EQ(ReshapedTo("shape { dim: 1 } axis: -1 num_axes: 0", in), (Shape{2, 3, 4, 5, 1}));
  EXPECT_EQ(ReshapedTo("shape { dim: 1 } axis: 0 num_axes: 0", in), (Shape{1, 2, 3, 4, 5}));
  EXPECT_EQ(ReshapedTo("shape { dim: 0 dim: -1 } axis: 2", in), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(ReshapedTo("shape { dim: 2 dim: -1 } axis: -3 num_axes: 1", in),
            (Shape{2, 3, 2, 2, 5}));
}

TEST(ReshapeLayerTest, Errors) {
  const Shape in = {2, 3, 4, 5};
  auto error = [&](const std::string& param) {
    return SetUpOne("type: 'Reshape' reshape_param { " + param + " }", in).message();
  };
  EXPECT_EQ(error("shape { dim: -1 dim: 3 dim: -1 }"),
            "new shape has more than one -1 (dims 0 and 2)");
  EXPECT_EQ(error("shape { dim: 7 dim: -1 }"),
            "bottom count 120 is not a multiple of the given dims' product 7; cannot infer the -1 "
            "dim");
  EXPECT_EQ(error("shape { dim: 7 dim: 8 }"),
            "new shape 7 8 (56) does not match bottom 0 2 3 4 5 (120) in count");
  EXPECT_EQ(error("shape { dim: 0 dim: 0 dim: 0 dim: 0 dim: 0 }"),
            "new shape dim 4 is 0 but bottom 0 of shape 2 3 4 5 (120) has no axis there to copy");
  EXPECT_EQ(error("shape { dim: 2 dim: -3 }"),
            "new shape dim 1 is -3; only -1 (infer) and 0 (copy) may be non-positive");
  EXPECT_EQ(error("shape { dim: -1 } axis: 5"),
            "axis 5 is out of range for bottom 0 of shape 2 3 4 5 (120)");
  EXPECT_EQ(error("shape { dim: -1 } axis: -6"),
            "axis -6 is out of range for bottom 0 of shape 2 3 4 5 (120)");
  EXPECT_EQ(error("shape { dim: -1 } num_axes: -2"),
            "num_axes must be >= 0, or -1 for all; got -2");
  EXPECT_EQ(error("shape { dim: -1 } axis: 2 num_axes: 3"),
            "axis + num_axes = 5 is out of range for bottom 0 of shape 2 3 4 5 (120)");

  BlobSet blobs;
  Blob* b = blobs.Add({2, 3});
  auto layer = MakeLayer("type: 'Reshape' reshape_param { shape { dim: -1 } }", Engine::kReference);
  EXPECT_EQ(layer->SetUp({b}, {b}).message(), "Reshape cannot run in place");
}

TEST(ReshapeLayerTest, SharesDataAndDiffAndFollowsBatchSize) {
  BlobSet bottom, top;
  bottom.Add({2, 3, 2});
  top.Add({});
  auto layer =
      MakeLayer("type: 'Reshape' reshape_param { shape { dim: 0 dim: -1 } }", Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  bottom[0]->mutable_cpu_data()[5] = 3.f;
  layer->Forward(bottom.vec(), top.vec());
  EXPECT_EQ(top[0]->cpu_data()[5], 3.f);
  top[0]->mutable_cpu_diff()[7] = 4.f;
  layer->Backward(top.vec(), {true}, bottom.vec());
  EXPECT_EQ(bottom[0]->cpu_diff()[7], 4.f);
  bottom[0]->Reshape({5, 3, 2});
  ASSERT_TRUE(layer->Reshape(bottom.vec(), top.vec()).ok());
  EXPECT_EQ(top[0]->shape(), (Shape{5, 6}));
  EXPECT_TRUE(top[0]->SharesDataWith(*bottom[0]));
  CheckGradients(*layer, bottom.vec(), top.vec());
}

TEST(FlattenLayerTest, Shapes) {
  const Shape in = {2, 3, 4, 5};
  Shape out;
  ASSERT_TRUE(SetUpOne("type: 'Flatten'", in, &out).ok());
  EXPECT_EQ(out, (Shape{2, 60}));
  ASSERT_TRUE(SetUpOne("type: 'Flatten' flatten_param { axis: 2 }", in, &out).ok());
  EXPECT_EQ(out, (Shape{2, 3, 20}));
  ASSERT_TRUE(SetUpOne("type: 'Flatten' flatten_param { axis: 1 end_axis: -2 }", in, &out).ok());
  EXPECT_EQ(out, (Shape{2, 12, 5}));
  ASSERT_TRUE(SetUpOne("type: 'Flatten' flatten_param { axis: 0 end_axis: 0 }", in, &out).ok());
  EXPECT_EQ(out, in);
  ASSERT_TRUE(SetUpOne("type: 'Flatten' flatten_param { axis: 0 }", in, &out).ok());
  EXPECT_EQ(out, (Shape{120}));
}

TEST(FlattenLayerTest, Errors) {
  const Shape in = {2, 3, 4, 5};
  EXPECT_EQ(SetUpOne("type: 'Flatten' flatten_param { axis: 4 }", in).message(),
            "axis 4 is out of range for bottom 0 of shape 2 3 4 5 (120)");
  EXPECT_EQ(SetUpOne("type: 'Flatten' flatten_param { end_axis: -5 }", in).message(),
            "axis -5 is out of range for bottom 0 of shape 2 3 4 5 (120)");
  EXPECT_EQ(SetUpOne("type: 'Flatten' flatten_param { axis: 2 end_axis: 1 }", in).message(),
            "end_axis 1 comes before axis 2 in bottom 0 of shape 2 3 4 5 (120)");
  BlobSet blobs;
  Blob* b = blobs.Add({2, 3});
  EXPECT_EQ(MakeLayer("type: 'Flatten'", Engine::kReference)->SetUp({b}, {b}).message(),
            "Flatten cannot run in place");
}

TEST(FlattenLayerTest, SharesStorage) {
  BlobSet bottom, top;
  BlobSet::FillGaussian(bottom.Add({2, 3, 2}), 1);
  top.Add({});
  auto layer = MakeLayer("type: 'Flatten'", Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  EXPECT_TRUE(top[0]->SharesDataWith(*bottom[0]));
  CheckGradients(*layer, bottom.vec(), top.vec());
}

TEST(SplitLayerTest, TopsShareDataAndBackwardSumsDiffs) {
  BlobSet bottom, top;
  bottom.Add({2, 3});
  for (int i = 0; i < 3; ++i) top.Add({});
  auto layer = MakeLayer("type: 'Split'", Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  for (int i = 0; i < 6; ++i) bottom[0]->mutable_cpu_data()[i] = i;
  layer->Forward(bottom.vec(), top.vec());
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(top[t]->shape(), (Shape{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(top[t]->cpu_data()[i], i);
    for (int i = 0; i < 6; ++i) top[t]->mutable_cpu_diff()[i] = (t + 1) * 10.f + i;
  }
  layer->Backward(top.vec(), {true}, bottom.vec());
  // 10+i + 20+i + 30+i
  for (int i = 0; i < 6; ++i) EXPECT_EQ(bottom[0]->cpu_diff()[i], 60.f + 3 * i) << i;
  // The tops' diffs stay separate.
  EXPECT_EQ(top[0]->cpu_diff()[0], 10.f);
  CheckGradients(*layer, bottom.vec(), top.vec());
}

TEST(SplitLayerTest, Errors) {
  BlobSet blobs;
  Blob* a = blobs.Add({2});
  Blob* b = blobs.Add({2});
  EXPECT_EQ(MakeLayer("type: 'Split'", Engine::kReference)->SetUp({a}, {b, a}).message(),
            "Split cannot run in place (top 1 is the bottom)");
  EXPECT_EQ(MakeLayer("type: 'Split'", Engine::kReference)->SetUp({a}, {}).message(),
            "Split layer produces at least 1 top, got 0");
}

}  // namespace
}  // namespace pstrain

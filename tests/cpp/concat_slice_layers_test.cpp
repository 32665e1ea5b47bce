// Concat and Slice: inverse copies along one axis.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::CheckGradients;
using testing::MakeLayer;

void FillIota(Blob* blob, float start) {
  for (int64_t i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = start + i;
}

TEST(ConcatLayerTest, ForwardBackwardAlongChannels) {
  BlobSet bottom, top;
  FillIota(bottom.Add({2, 1, 2}), 0);    // n0: 0 1      n1: 2 3
  FillIota(bottom.Add({2, 2, 2}), 100);  // n0: 100..103 n1: 104..107
  top.Add({});
  auto layer = MakeLayer("type: 'Concat'", Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 3, 2}));
  layer->Forward(bottom.vec(), top.vec());
  const std::vector<float> expected = {0, 1, 100, 101, 102, 103, 2, 3, 104, 105, 106, 107};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(top[0]->cpu_data()[i], expected[i]) << i;
  for (int i = 0; i < 12; ++i) top[0]->mutable_cpu_diff()[i] = expected[i] + 0.5f;
  layer->Backward(top.vec(), {true, true}, bottom.vec());
  for (int b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < bottom[b]->count(); ++i) {
      EXPECT_EQ(bottom[b]->cpu_diff()[i], bottom[b]->cpu_data()[i] + 0.5f) << b << " " << i;
    }
  }
}

TEST(ConcatLayerTest, AxisChoices) {
  struct Case {
    std::string param;
    std::vector<int> a, b, top;
  };
  const std::vector<Case> cases = {
      {"", {2, 3, 4}, {2, 5, 4}, {2, 8, 4}},
      {"concat_param { axis: 0 }", {2, 3, 4}, {1, 3, 4}, {3, 3, 4}},
      {"concat_param { axis: -1 }", {2, 3, 4}, {2, 3, 1}, {2, 3, 5}},
      {"concat_param { concat_dim: 2 }", {2, 3, 4}, {2, 3, 2}, {2, 3, 6}},
  };
  for (const Case& c : cases) {
    BlobSet bottom, top;
    bottom.Add(c.a);
    bottom.Add(c.b);
    top.Add({});
    auto layer = MakeLayer("type: 'Concat' " + c.param, Engine::kReference);
    Status s = layer->SetUp(bottom.vec(), top.vec());
    ASSERT_TRUE(s.ok()) << c.param << ": " << s.message();
    EXPECT_EQ(top[0]->shape(), c.top) << c.param;
  }
}

Status SetUpConcat(const std::string& param, const std::vector<std::vector<int>>& shapes) {
  BlobSet bottom, top;
  for (const auto& s : shapes) bottom.Add(s);
  top.Add({});
  return MakeLayer("type: 'Concat' " + param, Engine::kReference)->SetUp(bottom.vec(), top.vec());
}

TEST(ConcatLayerTest, Errors) {
  EXPECT_EQ(SetUpConcat("concat_param { axis: 1 concat_dim: 1 }", {{2, 3}, {2, 3}}).message(),
            "give either axis or concat_dim, not both");
  EXPECT_EQ(SetUpConcat("concat_param { axis: 3 }", {{2, 3, 4}, {2, 3, 4}}).message(),
            "axis 3 is out of range for bottom 0 of shape 2 3 4 (24)");
  EXPECT_EQ(SetUpConcat("", {{2, 3, 4}, {2, 3, 5}}).message(),
            "bottom 1 has shape 2 3 5 (30), bottom 0 has 2 3 4 (24); Concat along axis 1 needs "
            "all other axes equal");
  EXPECT_EQ(SetUpConcat("", {{2, 3, 4}, {2, 12}}).message(),
            "bottom 1 has shape 2 12 (24), bottom 0 has 2 3 4 (24); Concat along axis 1 needs "
            "all other axes equal");
}

TEST(ConcatLayerTest, SingleBottomSharesStorage) {
  BlobSet bottom, top;
  FillIota(bottom.Add({2, 3}), 1);
  top.Add({});
  auto layer = MakeLayer("type: 'Concat'", Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  EXPECT_TRUE(top[0]->SharesDataWith(*bottom[0]));
  top[0]->mutable_cpu_diff()[4] = 9.f;
  EXPECT_EQ(bottom[0]->cpu_diff()[4], 9.f);
}

TEST(ConcatLayerTest, Gradients) {
  for (const char* param : {"", "concat_param { axis: 0 }", "concat_param { axis: -1 }"}) {
    BlobSet bottom, top;
    BlobSet::FillGaussian(bottom.Add({2, 2, 3}), 1);
    BlobSet::FillGaussian(bottom.Add({2, 2, 3}), 2);
    BlobSet::FillGaussian(bottom.Add({2, 2, 3}), 3);
    top.Add({});
    auto layer = MakeLayer(std::string("type: 'Concat' ") + param, Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    CheckGradients(*layer, bottom.vec(), top.vec());
  }
}

Status SetUpSlice(const std::string& param, const std::vector<int>& shape, int num_tops,
                  std::vector<std::vector<int>>* top_shapes = nullptr) {
  BlobSet bottom, top;
  bottom.Add(shape);
  for (int i = 0; i < num_tops; ++i) top.Add({});
  Status s =
      MakeLayer("type: 'Slice' " + param, Engine::kReference)->SetUp(bottom.vec(), top.vec());
  if (top_shapes != nullptr) {
    for (int i = 0; i < num_tops; ++i) top_shapes->push_back(top[i]->shape());
  }
  return s;
}

TEST(SliceLayerTest, Shapes) {
  std::vector<std::vector<int>> shapes;
  ASSERT_TRUE(
      SetUpSlice("slice_param { slice_point: 1 slice_point: 4 }", {2, 6, 2}, 3, &shapes).ok());
  EXPECT_EQ(shapes, (std::vector<std::vector<int>>{{2, 1, 2}, {2, 3, 2}, {2, 2, 2}}));
  shapes.clear();
  ASSERT_TRUE(SetUpSlice("", {2, 6, 2}, 3, &shapes).ok());
  EXPECT_EQ(shapes, (std::vector<std::vector<int>>{{2, 2, 2}, {2, 2, 2}, {2, 2, 2}}));
  shapes.clear();
  ASSERT_TRUE(SetUpSlice("slice_param { slice_dim: 0 }", {4, 3}, 2, &shapes).ok());
  EXPECT_EQ(shapes, (std::vector<std::vector<int>>{{2, 3}, {2, 3}}));
  shapes.clear();
  ASSERT_TRUE(SetUpSlice("slice_param { axis: -1 slice_point: 2 }", {4, 3}, 2, &shapes).ok());
  EXPECT_EQ(shapes, (std::vector<std::vector<int>>{{4, 2}, {4, 1}}));
}

TEST(SliceLayerTest, Errors) {
  EXPECT_EQ(SetUpSlice("slice_param { axis: 1 slice_dim: 1 }", {2, 4}, 2).message(),
            "give either axis or slice_dim, not both");
  EXPECT_EQ(SetUpSlice("slice_param { axis: -3 }", {2, 4}, 2).message(),
            "axis -3 is out of range for bottom 0 of shape 2 4 (8)");
  EXPECT_EQ(SetUpSlice("", {2, 5}, 2).message(),
            "2 tops do not divide axis 1 of size 5 evenly; give slice_point");
  EXPECT_EQ(SetUpSlice("slice_param { slice_point: 1 }", {2, 5}, 3).message(),
            "1 slice points for 3 tops; need one fewer than the tops");
  const std::string order =
      "slice points must increase strictly within (0, 5) along axis 1 of "
      "bottom 2 5 (10)";
  EXPECT_EQ(SetUpSlice("slice_param { slice_point: 3 slice_point: 2 }", {2, 5}, 3).message(),
            order);
  EXPECT_EQ(SetUpSlice("slice_param { slice_point: 0 }", {2, 5}, 2).message(), order);
  EXPECT_EQ(SetUpSlice("slice_param { slice_point: 5 }", {2, 5}, 2).message(), order);
  EXPECT_EQ(SetUpSlice("slice_param { slice_point: 7 }", {2, 5}, 2).message(), order);
}

TEST(SliceLayerTest, ForwardByHandAndConcatRoundTrip) {
  BlobSet bottom, sliced, joined;
  FillIota(bottom.Add({2, 5, 2}), 0);
  for (int i = 0; i < 3; ++i) sliced.Add({});
  joined.Add({});
  auto slice =
      MakeLayer("type: 'Slice' slice_param { slice_point: 1 slice_point: 3 }", Engine::kReference);
  auto concat = MakeLayer("type: 'Concat'", Engine::kReference);
  ASSERT_TRUE(slice->SetUp(bottom.vec(), sliced.vec()).ok());
  ASSERT_TRUE(concat->SetUp(sliced.vec(), joined.vec()).ok());
  slice->Forward(bottom.vec(), sliced.vec());
  // Top 1 holds channels 1..2 of each image: n0: 2 3 4 5, n1: 12 13 14 15.
  const std::vector<float> middle = {2, 3, 4, 5, 12, 13, 14, 15};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(sliced[1]->cpu_data()[i], middle[i]) << i;
  concat->Forward(sliced.vec(), joined.vec());
  ASSERT_EQ(joined[0]->shape(), bottom[0]->shape());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(joined[0]->cpu_data()[i], i);

  // Gradients travel back the same way.
  for (int i = 0; i < 20; ++i) joined[0]->mutable_cpu_diff()[i] = -i;
  concat->Backward(joined.vec(), {true, true, true}, sliced.vec());
  slice->Backward(sliced.vec(), {true}, bottom.vec());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(bottom[0]->cpu_diff()[i], -i);
}

TEST(SliceLayerTest, Gradients) {
  for (const char* param : {"slice_param { slice_point: 1 slice_point: 3 }",
                            "slice_param { axis: 0 }", "slice_param { axis: -1 slice_point: 1 }"}) {
    BlobSet bottom, top;
    BlobSet::FillGaussian(bottom.Add({2, 4, 3}), 4);
    const int num_tops = std::string(param).find("point: 3") != std::string::npos ? 3 : 2;
    for (int i = 0; i < num_tops; ++i) top.Add({});
    auto layer = MakeLayer(std::string("type: 'Slice' ") + param, Engine::kReference);
    Status s = layer->SetUp(bottom.vec(), top.vec());
    ASSERT_TRUE(s.ok()) << param << ": " << s.message();
    CheckGradients(*layer, bottom.vec(), top.vec());
  }
}

}  // namespace
}  // namespace pstrain

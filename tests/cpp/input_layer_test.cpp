// Input layer: shapes and shape errors.
#include <gtest/gtest.h>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;

Status SetUpTops(Layer& layer, BlobSet& tops, int n) {
  for (int i = 0; i < n; ++i) tops.Add({1});
  return layer.SetUp({}, tops.vec());
}

TEST(InputLayerTest, OneShapeForAllOrOnePerTop) {
  auto layer = testing::MakeLayer(
      "name: 'in' type: 'Input' top: 'a' top: 'b' input_param { shape { dim: 2 dim: 3 } }",
      Engine::kFast);
  BlobSet tops;
  ASSERT_TRUE(SetUpTops(*layer, tops, 2).ok());
  EXPECT_EQ(tops[0]->shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(tops[1]->shape(), (std::vector<int>{2, 3}));

  layer = testing::MakeLayer(
      "name: 'in' type: 'Input' top: 'a' top: 'b' "
      "input_param { shape { dim: 4 } shape { dim: 1 dim: 3 dim: 8 dim: 8 } }",
      Engine::kFast);
  BlobSet tops2;
  ASSERT_TRUE(SetUpTops(*layer, tops2, 2).ok());
  EXPECT_EQ(tops2[0]->shape(), (std::vector<int>{4}));
  EXPECT_EQ(tops2[1]->shape(), (std::vector<int>{1, 3, 8, 8}));
  // Values the caller writes survive Forward.
  tops2[0]->mutable_cpu_data()[0] = 5.f;
  layer->Forward({}, tops2.vec());
  EXPECT_EQ(tops2[0]->cpu_data()[0], 5.f);
}

TEST(InputLayerTest, ShapeCountError) {
  auto layer = testing::MakeLayer(
      "name: 'in' type: 'Input' top: 'a' top: 'b' top: 'c' "
      "input_param { shape { dim: 4 } shape { dim: 1 } }",
      Engine::kFast);
  BlobSet tops;
  Status s = SetUpTops(*layer, tops, 3);
  EXPECT_EQ(s.message(),
            "input_param.shape must be given once, once per top, or not at all: 3 tops, 2 shapes");
}

}  // namespace
}  // namespace pstrain

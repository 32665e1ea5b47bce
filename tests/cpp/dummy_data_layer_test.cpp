// DummyData layer: shapes, shape errors and fillers.
#include <gtest/gtest.h>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;

Status SetUpTops(Layer& layer, BlobSet& tops, int n) {
  for (int i = 0; i < n; ++i) tops.Add({1});
  return layer.SetUp({}, tops.vec());
}

TEST(DummyDataLayerTest, DefaultIsZeroAndConstantsAreNotRefilled) {
  auto layer = testing::MakeLayer(
      "name: 'd' type: 'DummyData' top: 'a' top: 'b' "
      "dummy_data_param { shape { dim: 2 dim: 3 } }",
      Engine::kFast);
  BlobSet tops;
  ASSERT_TRUE(SetUpTops(*layer, tops, 2).ok());
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(tops[t]->shape(), (std::vector<int>{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(tops[t]->cpu_data()[i], 0.f);
  }
  tops[0]->mutable_cpu_data()[1] = 9.f;  // a constant top is not refilled
  layer->Forward({}, tops.vec());
  EXPECT_EQ(tops[0]->cpu_data()[1], 9.f);
}

TEST(DummyDataLayerTest, LegacyShapesAndPerTopFillers) {
  auto layer = testing::MakeLayer(
      "name: 'd' type: 'DummyData' top: 'a' top: 'b' dummy_data_param { "
      "num: 2 channels: 3 channels: 1 height: 4 width: 5 width: 1 "
      "data_filler { type: 'constant' value: 7 } "
      "data_filler { type: 'uniform' min: 1 max: 2 } }",
      Engine::kFast);
  BlobSet tops;
  Status s = SetUpTops(*layer, tops, 2);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(tops[0]->shape(), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(tops[1]->shape(), (std::vector<int>{2, 1, 4, 1}));
  for (int i = 0; i < tops[0]->count(); ++i) ASSERT_EQ(tops[0]->cpu_data()[i], 7.f);
  layer->Forward({}, tops.vec());
  std::vector<float> first(tops[1]->cpu_data(), tops[1]->cpu_data() + 8);
  for (float v : first) {
    EXPECT_GE(v, 1.f);
    EXPECT_LE(v, 2.f);
  }
  layer->Forward({}, tops.vec());  // the uniform top is refilled every forward
  std::vector<float> second(tops[1]->cpu_data(), tops[1]->cpu_data() + 8);
  EXPECT_NE(first, second);
}

TEST(DummyDataLayerTest, Errors) {
  auto error = [](const std::string& param, int num_tops) {
    std::string tops;
    for (int i = 0; i < num_tops; ++i) tops += "top: 't" + std::to_string(i) + "' ";
    auto layer = testing::MakeLayer(
        "name: 'd' type: 'DummyData' " + tops + "dummy_data_param { " + param + " }",
        Engine::kFast);
    BlobSet blobs;
    Status s = SetUpTops(*layer, blobs, num_tops);
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  EXPECT_EQ(error("", 1),
            "dummy_data_param.shape must be given once or once per top: 1 tops, 0 "
            "shapes");
  EXPECT_EQ(error("shape { dim: 1 } shape { dim: 2 }", 3),
            "dummy_data_param.shape must be given once or once per top: 3 tops, 2 shapes");
  EXPECT_EQ(error("shape { dim: 1 } num: 1 channels: 1 height: 1 width: 1", 1),
            "dummy_data_param: give either shape or num/channels/height/width, not both");
  EXPECT_EQ(error("num: 1 num: 2 channels: 1 height: 1 width: 1", 3),
            "dummy_data_param.num must be given once or once per top: 3 tops, 2 values");
  EXPECT_EQ(error("num: 1 channels: 1 height: 1", 1),
            "dummy_data_param.width must be given once or once per top: 1 tops, 0 values");
  EXPECT_EQ(error("shape { dim: 1 } data_filler { } data_filler { }", 3),
            "dummy_data_param.data_filler must be given 0, 1 or once per top: 3 tops, 2 fillers");
  EXPECT_EQ(error("shape { dim: 1 } data_filler { type: 'nope' }", 1),
            "data_filler for top 0: unknown filler type 'nope' (known: constant, uniform, "
            "gaussian, xavier, msra, positive_unitball, bilinear)");
}

}  // namespace
}  // namespace pstrain

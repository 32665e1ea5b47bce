#include <gtest/gtest.h>

#include <cmath>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::MakeLayer;

template <typename EngineTag>
class LrnLayerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Layer> Make(const std::string& lrn_param) {
    return MakeLayer("name: 'norm' type: 'LRN' lrn_param { " + lrn_param + " }",
                     EngineTag::kEngine);
  }
};
TYPED_TEST_SUITE(LrnLayerTest, testing::LayerEngines);

TYPED_TEST(LrnLayerTest, RejectsEvenLocalSize) {
  BlobSet b, t;
  b.Add({1, 4, 2, 2});
  t.Add({});
  auto layer = this->Make("local_size: 4");
  Status s = layer->SetUp(b.vec(), t.vec());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "LRN only supports odd values for local_size, got 4");
}

TYPED_TEST(LrnLayerTest, RejectsNonFourAxisBottom) {
  BlobSet b, t;
  b.Add({2, 3});
  t.Add({});
  auto layer = this->Make("local_size: 3");
  Status s = layer->SetUp(b.vec(), t.vec());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "LRN needs a 4-axis bottom (num, channels, height, width), got 2 3 (6)");
}

TYPED_TEST(LrnLayerTest, RejectsInPlace) {
  BlobSet b;
  b.Add({1, 3, 2, 2});
  auto layer = this->Make("local_size: 3");
  Status s = layer->SetUp(b.vec(), b.vec());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "LRN cannot run in place");
}

TYPED_TEST(LrnLayerTest, ForwardAcrossChannelsByHand) {
  BlobSet b, t;
  Blob* x = b.Add({1, 5, 1, 1});
  t.Add({});
  for (int c = 0; c < 5; ++c) x->mutable_cpu_data()[c] = static_cast<float>(c + 1);
  auto layer = this->Make("local_size: 3 alpha: 0.3 beta: 0.75 k: 2");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  layer->Forward(b.vec(), t.vec());
  ASSERT_EQ(t[0]->shape(), std::vector<int>({1, 5, 1, 1}));
  // Window sums of squares (1 4 9 16 25): 5 14 29 50 41; scale = 2 + 0.3/3 * sum.
  const double scale[5] = {2.5, 3.4, 4.9, 7.0, 6.1};
  for (int c = 0; c < 5; ++c) {
    EXPECT_NEAR(t[0]->cpu_data()[c], (c + 1) * std::pow(scale[c], -0.75), 1e-5) << c;
  }
}

TYPED_TEST(LrnLayerTest, ForwardWithinChannelByHandIgnoresK) {
  BlobSet b, t;
  Blob* x = b.Add({1, 1, 3, 3});
  t.Add({});
  for (int i = 0; i < 9; ++i) x->mutable_cpu_data()[i] = static_cast<float>(i + 1);
  auto layer = this->Make("local_size: 3 alpha: 0.9 beta: 0.5 k: 5 norm_region: WITHIN_CHANNEL");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  layer->Forward(b.vec(), t.vec());
  // Squares 1 4 9 / 16 25 36 / 49 64 81; 3x3 window sums, zero outside:
  const double sums[9] = {46, 91, 74, 159, 285, 219, 154, 271, 206};
  for (int i = 0; i < 9; ++i) {
    const double scale = 1.0 + 0.9 / 9.0 * sums[i];
    EXPECT_NEAR(t[0]->cpu_data()[i], (i + 1) / std::sqrt(scale), 1e-5) << i;
  }
}

TYPED_TEST(LrnLayerTest, GradientAcrossChannels) {
  BlobSet b, t;
  BlobSet::FillGaussian(b.Add({2, 7, 3, 3}), 5);
  t.Add({});
  auto layer = this->Make("local_size: 5 alpha: 0.8 beta: 0.75 k: 1.5");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  testing::CheckGradients(*layer, b.vec(), t.vec());
}

TYPED_TEST(LrnLayerTest, GradientWithinChannel) {
  BlobSet b, t;
  BlobSet::FillGaussian(b.Add({2, 2, 5, 5}), 6);
  t.Add({});
  auto layer = this->Make("local_size: 3 alpha: 2 beta: 0.75 norm_region: WITHIN_CHANNEL");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  testing::CheckGradients(*layer, b.vec(), t.vec());
}

TEST(LrnEnginesTest, AlexNetAcrossChannelsAgree) {
  testing::ExpectEnginesAgree(
      "name: 'norm1' type: 'LRN' lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 }",
      {{2, 96, 27, 27}}, [](const BlobVec& b) { BlobSet::FillUniform(b[0], 11, 0.f, 200.f); });
}

TEST(LrnEnginesTest, WithinChannelAgree) {
  testing::ExpectEnginesAgree(
      "name: 'norm' type: 'LRN' lrn_param { local_size: 5 alpha: 0.5 beta: 0.75 "
      "norm_region: WITHIN_CHANNEL }",
      {{2, 8, 13, 11}}, [](const BlobVec& b) { BlobSet::FillGaussian(b[0], 12, 2.f); });
}

}  // namespace
}  // namespace pstrain

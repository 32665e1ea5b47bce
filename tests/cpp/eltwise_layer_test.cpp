#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::CheckGradients;
using testing::MakeLayer;

// Three bottoms of 4 elements: a, b, c.
const float kA[4] = {1, -2, 3, 0.5f};
const float kB[4] = {2, 2, -1, 0.5f};
const float kC[4] = {0.5f, 3, -4, -1};

struct Fixture {
  BlobSet bottom, top;
  std::unique_ptr<Layer> layer;

  Status Build(const std::string& param, int num_bottoms = 3) {
    const float* values[3] = {kA, kB, kC};
    for (int b = 0; b < num_bottoms; ++b) {
      Blob* blob = bottom.Add({2, 2});
      std::copy(values[b], values[b] + 4, blob->mutable_cpu_data());
    }
    top.Add({});
    layer = MakeLayer("type: 'Eltwise' eltwise_param { " + param + " }", Engine::kReference);
    return layer->SetUp(bottom.vec(), top.vec());
  }
  void ExpectTop(const std::vector<float>& expected) {
    layer->Forward(bottom.vec(), top.vec());
    EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 2}));
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(top[0]->cpu_data()[i], expected[i]) << i;
  }
  // Backward with dy = [1, 2, 3, 4]; checks each bottom's diff.
  void ExpectDiffs(const std::vector<std::vector<float>>& expected) {
    const float dy[4] = {1, 2, 3, 4};
    std::copy(dy, dy + 4, top[0]->mutable_cpu_diff());
    layer->Backward(top.vec(), std::vector<bool>(bottom.size(), true), bottom.vec());
    for (size_t b = 0; b < expected.size(); ++b) {
      for (int i = 0; i < 4; ++i) {
        EXPECT_FLOAT_EQ(bottom[b]->cpu_diff()[i], expected[b][i]) << "bottom " << b << " " << i;
      }
    }
  }
};

TEST(EltwiseLayerTest, Prod) {
  for (const char* stable : {"true", "false"}) {
    Fixture f;
    ASSERT_TRUE(f.Build(std::string("operation: PROD stable_prod_grad: ") + stable).ok());
    f.ExpectTop({1, -12, 12, -0.25f});
    // dx_a = dy * b * c, ...
    f.ExpectDiffs({{1, 12, 12, -2}, {0.5f, -12, -36, -2}, {2, -8, -9, 1}});
  }
}

TEST(EltwiseLayerTest, SumDefaultAndCoeffs) {
  Fixture plain;
  ASSERT_TRUE(plain.Build("operation: SUM").ok());
  plain.ExpectTop({3.5f, 3, -2, 0});
  plain.ExpectDiffs({{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}});

  Fixture weighted;
  ASSERT_TRUE(weighted.Build("operation: SUM coeff: 1 coeff: -1 coeff: 2").ok());
  weighted.ExpectTop({0, 2, -4, -2});
  weighted.ExpectDiffs({{1, 2, 3, 4}, {-1, -2, -3, -4}, {2, 4, 6, 8}});
}

TEST(EltwiseLayerTest, MaxRoutesGradientToTheWinner) {
  Fixture f;
  ASSERT_TRUE(f.Build("operation: MAX").ok());
  // Element 3 ties a and b at 0.5: b wins, as in Caffe.
  f.ExpectTop({2, 3, 3, 0.5f});
  f.ExpectDiffs({{0, 0, 3, 0}, {1, 0, 0, 4}, {0, 2, 0, 0}});
}

TEST(EltwiseLayerTest, Errors) {
  Fixture count;
  EXPECT_EQ(count.Build("operation: SUM coeff: 1 coeff: 2").message(),
            "Eltwise takes one coeff per bottom: 3 bottoms, 2 coeffs");
  Fixture prod;
  EXPECT_EQ(prod.Build("operation: PROD coeff: 1 coeff: 2 coeff: 3").message(),
            "Eltwise takes coeff only for SUM, not PROD");
  Fixture one;
  EXPECT_EQ(one.Build("operation: SUM", 1).message(),
            "Eltwise layer takes at least 2 bottoms, got 1");
  Fixture shape;
  ASSERT_TRUE(shape.Build("operation: SUM", 2).ok());
  shape.bottom[1]->Reshape({2, 3});
  EXPECT_EQ(shape.layer->Reshape(shape.bottom.vec(), shape.top.vec()).message(),
            "bottom 1 has shape 2 3 (6), bottom 0 has 2 2 (4); Eltwise needs equal shapes");
}

TEST(EltwiseLayerTest, Gradients) {
  const std::vector<std::string> params = {
      "operation: PROD", "operation: PROD stable_prod_grad: false",
      "operation: SUM coeff: 0.5 coeff: -2 coeff: 1.5", "operation: MAX"};
  for (const std::string& param : params) {
    SCOPED_TRACE(param);
    BlobSet bottom, top;
    for (int b = 0; b < 3; ++b) {
      Blob* blob = bottom.Add({2, 3, 2});
      // Distinct per element across bottoms and away from 0, so MAX has a clear
      // winner and the unstable PROD gradient is defined.
      float* d = blob->mutable_cpu_data();
      for (int i = 0; i < 12; ++i) d[i] = ((i * 3 + b * 5) % 13) * 0.25f - 1.6f;
    }
    top.Add({});
    auto layer = MakeLayer("type: 'Eltwise' eltwise_param { " + param + " }", Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    CheckGradients(*layer, bottom.vec(), top.vec());
  }
}

}  // namespace
}  // namespace pstrain

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::CheckGradients;
using testing::MakeLayer;

std::string IpLayer(const std::string& extra) {
  return "name: 'ip' type: 'InnerProduct' inner_product_param { " + extra + " }";
}

const char* kGaussian =
    "weight_filler { type: 'gaussian' std: 1 } bias_filler { type: 'gaussian' std: 1 }";

TEST(InnerProductLayerTest, ShapesFollowAxisAndTranspose) {
  struct Case {
    std::string extra;
    std::vector<int> top, weight;
  };
  const std::vector<Case> cases = {
      {"num_output: 7", {2, 7}, {7, 60}},
      {"num_output: 7 axis: 2", {2, 3, 7}, {7, 20}},
      {"num_output: 7 axis: -1", {2, 3, 4, 7}, {7, 5}},
      {"num_output: 7 transpose: true", {2, 7}, {60, 7}},
  };
  for (const Case& c : cases) {
    BlobSet bottom, top;
    bottom.Add({2, 3, 4, 5});
    top.Add({});
    auto layer = MakeLayer(IpLayer(c.extra), Engine::kReference);
    Status s = layer->SetUp(bottom.vec(), top.vec());
    ASSERT_TRUE(s.ok()) << c.extra << ": " << s.message();
    EXPECT_EQ(top[0]->shape(), c.top) << c.extra;
    ASSERT_EQ(layer->blobs().size(), 2u);
    EXPECT_EQ(layer->blobs()[0]->shape(), c.weight) << c.extra;
    EXPECT_EQ(layer->blobs()[1]->shape(), std::vector<int>{7});
  }
  BlobSet bottom, top;
  bottom.Add({2, 3});
  top.Add({});
  auto layer = MakeLayer(IpLayer("num_output: 4 bias_term: false"), Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  EXPECT_EQ(layer->blobs().size(), 1u);
}

Status SetUpWith(const std::string& extra, const std::vector<int>& shape) {
  BlobSet bottom, top;
  bottom.Add(shape);
  top.Add({});
  auto layer = MakeLayer(IpLayer(extra), Engine::kReference);
  return layer->SetUp(bottom.vec(), top.vec());
}

TEST(InnerProductLayerTest, ParameterErrors) {
  EXPECT_EQ(SetUpWith("", {2, 3}).message(), "num_output must be given (and > 0)");
  EXPECT_EQ(SetUpWith("num_output: 2 axis: 4", {2, 3, 4, 5}).message(),
            "bottom 0 has 4 axes; InnerProduct with axis 4 needs more");
  EXPECT_EQ(SetUpWith("num_output: 2 axis: -5", {2, 3, 4, 5}).message(),
            "bottom 0 has 4 axes; InnerProduct with axis -5 needs more");
  EXPECT_EQ(SetUpWith("num_output: 2 weight_filler { type: 'nonsense' }", {2, 3}).ok(), false);
}

TEST(InnerProductLayerTest, InputSizeChangeIsAnError) {
  BlobSet bottom, top;
  bottom.Add({4, 50, 4, 4});
  top.Add({});
  auto layer = MakeLayer(IpLayer("num_output: 10"), Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  bottom[0]->Reshape({8, 50, 4, 4});  // batch change is fine
  ASSERT_TRUE(layer->Reshape(bottom.vec(), top.vec()).ok());
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{8, 10}));
  bottom[0]->Reshape({8, 900});
  EXPECT_EQ(layer->Reshape(bottom.vec(), top.vec()).message(),
            "input size K changed from 800 to 900 (bottom 8 900 (7200))");
}

TEST(InnerProductLayerTest, PreloadedBlobsAreKeptAndChecked) {
  BlobSet bottom, top;
  bottom.Add({2, 3});
  top.Add({});
  auto layer = MakeLayer(IpLayer("num_output: 2"), Engine::kReference);
  layer->blobs().push_back(std::make_shared<Blob>(std::vector<int>{2, 3}));
  layer->blobs().push_back(std::make_shared<Blob>(std::vector<int>{2}));
  layer->blobs()[0]->mutable_cpu_data()[4] = 9.f;
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  EXPECT_EQ(layer->blobs()[0]->cpu_data()[4], 9.f);

  auto wrong = MakeLayer(IpLayer("num_output: 2"), Engine::kReference);
  wrong->blobs().push_back(std::make_shared<Blob>(std::vector<int>{3, 2}));
  wrong->blobs().push_back(std::make_shared<Blob>(std::vector<int>{2}));
  EXPECT_EQ(wrong->SetUp(bottom.vec(), top.vec()).message(),
            "weight shape 3 2 (6) does not match 2 3 (6)");
}

TEST(InnerProductLayerTest, FillIsSeededByLayerName) {
  auto weights = [](const std::string& name) {
    BlobSet bottom, top;
    bottom.Add({2, 3});
    top.Add({});
    auto layer = MakeLayer("name: '" + name +
                               "' type: 'InnerProduct' inner_product_param { num_output: 2 "
                               "weight_filler { type: 'gaussian' std: 1 } }",
                           Engine::kReference);
    EXPECT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    const float* w = layer->blobs()[0]->cpu_data();
    return std::vector<float>(w, w + 6);
  };
  EXPECT_EQ(weights("a"), weights("a"));
  EXPECT_NE(weights("a"), weights("b"));
}

// W = [[1, 0, -1], [0.5, 0.5, 0.5]], b = [1, -1], stored as [N, K] or [K, N].
void SetHandParams(Layer& layer, bool transpose) {
  const float w[6] = {1, 0, -1, 0.5f, 0.5f, 0.5f};
  const float wt[6] = {1, 0.5f, 0, 0.5f, -1, 0.5f};
  float* dst = layer.blobs()[0]->mutable_cpu_data();
  for (int i = 0; i < 6; ++i) dst[i] = transpose ? wt[i] : w[i];
  layer.blobs()[1]->mutable_cpu_data()[0] = 1.f;
  layer.blobs()[1]->mutable_cpu_data()[1] = -1.f;
}

TEST(InnerProductLayerTest, ForwardAndBackwardByHand) {
  for (bool transpose : {false, true}) {
    BlobSet bottom, top;
    bottom.Add({2, 3});
    top.Add({});
    const float x[6] = {1, 2, 3, 4, 5, 6};
    std::copy(x, x + 6, bottom[0]->mutable_cpu_data());
    auto layer = MakeLayer(
        IpLayer(std::string("num_output: 2 transpose: ") + (transpose ? "true" : "false")),
        Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    SetHandParams(*layer, transpose);
    layer->Forward(bottom.vec(), top.vec());
    const float expected[4] = {-1, 2, -1, 6.5f};
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(top[0]->cpu_data()[i], expected[i]) << i;

    // dY = identity: dW = dY^T X = X, db = [1, 1], dX = dY W = W.
    const float dy[4] = {1, 0, 0, 1};
    std::copy(dy, dy + 4, top[0]->mutable_cpu_diff());
    for (auto& p : layer->blobs()) p->SetDiffZero();
    for (int pass = 1; pass <= 2; ++pass) {  // params accumulate, bottom diff is overwritten
      layer->Backward(top.vec(), {true}, bottom.vec());
      const float w[6] = {1, 0, -1, 0.5f, 0.5f, 0.5f};
      for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(bottom[0]->cpu_diff()[i], w[i]);
      const float* dw = layer->blobs()[0]->cpu_diff();
      for (int n = 0; n < 2; ++n) {
        for (int k = 0; k < 3; ++k) {
          EXPECT_FLOAT_EQ(transpose ? dw[k * 2 + n] : dw[n * 3 + k], pass * x[n * 3 + k]);
        }
      }
      EXPECT_FLOAT_EQ(layer->blobs()[1]->cpu_diff()[0], pass * 1.f);
      EXPECT_FLOAT_EQ(layer->blobs()[1]->cpu_diff()[1], pass * 1.f);
    }
  }
}

TEST(InnerProductLayerTest, SingleRowUsesTheSameMaths) {
  for (bool transpose : {false, true}) {
    BlobSet bottom, top;
    bottom.Add({1, 3});
    top.Add({});
    const float x[3] = {4, 5, 6};
    std::copy(x, x + 3, bottom[0]->mutable_cpu_data());
    auto layer = MakeLayer(
        IpLayer(std::string("num_output: 2 transpose: ") + (transpose ? "true" : "false")),
        Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    SetHandParams(*layer, transpose);
    layer->Forward(bottom.vec(), top.vec());
    EXPECT_FLOAT_EQ(top[0]->cpu_data()[0], -1.f);
    EXPECT_FLOAT_EQ(top[0]->cpu_data()[1], 6.5f);
  }
}

TEST(InnerProductLayerTest, Gradients) {
  const std::vector<std::string> variants = {
      "num_output: 4", "num_output: 4 transpose: true", "num_output: 3 axis: 2",
      "num_output: 4 bias_term: false", "num_output: 5 axis: -1 transpose: true"};
  for (const std::string& v : variants) {
    SCOPED_TRACE(v);
    for (const std::vector<int>& shape : {std::vector<int>{2, 3, 2, 2}, {1, 3, 2, 2}}) {
      BlobSet bottom, top;
      bottom.Add(shape);
      top.Add({});
      BlobSet::FillGaussian(bottom[0], 5);
      std::string extra =
          v + " " +
          (v.find("bias_term") == std::string::npos ? kGaussian
                                                    : "weight_filler { type: 'gaussian' std: 1 }");
      auto layer = MakeLayer(IpLayer(extra), Engine::kReference);
      ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
      CheckGradients(*layer, bottom.vec(), top.vec());
    }
  }
}

}  // namespace
}  // namespace pstrain

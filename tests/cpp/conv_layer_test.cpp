// Tests of ConvolutionLayer on both engines: output shapes, parameter errors,
// hand-computed forward cases, gradient checks of bottom, weights and bias,
// gradient accumulation, and reference/oneDNN agreement on realistic shapes.
#include "worker/layers/conv_layer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain::testing {
namespace {

std::string Conv(const std::string& conv_param) {
  return "name: 'conv' type: 'Convolution' convolution_param { " + conv_param + " }";
}

std::string GaussianConv(const std::string& conv_param) {
  return Conv(
      conv_param +
      " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }");
}

template <typename EngineTag>
class ConvolutionLayerTest : public ::testing::Test {
 protected:
  // Sets up a layer on one bottom of `shape`; returns the top shape.
  std::vector<int> TopShape(const std::string& param, const std::vector<int>& shape) {
    bottoms_ = BlobSet();
    tops_ = BlobSet();
    bottoms_.Add(shape);
    tops_.Add({});
    layer_ = MakeLayer(Conv(param), EngineTag::kEngine);
    Status s = layer_->SetUp(bottoms_.vec(), tops_.vec());
    EXPECT_TRUE(s.ok()) << s.message();
    return tops_[0]->shape();
  }

  // The SetUp error for `param` on a bottom of `shape`.
  std::string SetUpError(const std::string& param, const std::vector<int>& shape) {
    BlobSet bottoms;
    BlobSet tops;
    bottoms.Add(shape);
    tops.Add({});
    auto layer = MakeLayer(Conv(param), EngineTag::kEngine);
    Status s = layer->SetUp(bottoms.vec(), tops.vec());
    EXPECT_FALSE(s.ok());
    return s.message();
  }

  // Forward of a 1-image input with explicit weights (and bias when given).
  std::vector<float> Forward(const std::string& param, const std::vector<int>& shape,
                             const std::vector<float>& input, const std::vector<float>& weights,
                             const std::vector<float>& bias) {
    TopShape(param, shape);
    std::copy(input.begin(), input.end(), bottoms_[0]->mutable_cpu_data());
    EXPECT_EQ(layer_->blobs()[0]->count(), static_cast<int64_t>(weights.size()));
    std::copy(weights.begin(), weights.end(), layer_->blobs()[0]->mutable_cpu_data());
    if (!bias.empty()) std::copy(bias.begin(), bias.end(), layer_->blobs()[1]->mutable_cpu_data());
    layer_->Forward(bottoms_.vec(), tops_.vec());
    return std::vector<float>(tops_[0]->cpu_data(), tops_[0]->cpu_data() + tops_[0]->count());
  }

  void CheckGradientsOf(const std::string& param, const std::vector<int>& shape) {
    BlobSet bottoms;
    BlobSet tops;
    BlobSet::FillGaussian(bottoms.Add(shape), 7);
    tops.Add({});
    auto layer = MakeLayer(GaussianConv(param), EngineTag::kEngine);
    Status s = layer->SetUp(bottoms.vec(), tops.vec());
    ASSERT_TRUE(s.ok()) << s.message();
    CheckGradients(*layer, bottoms.vec(), tops.vec());
  }

  BlobSet bottoms_;
  BlobSet tops_;
  std::unique_ptr<Layer> layer_;
};

TYPED_TEST_SUITE(ConvolutionLayerTest, LayerEngines);

using Shape = std::vector<int>;

TYPED_TEST(ConvolutionLayerTest, OutputShapes) {
  EXPECT_EQ(this->TopShape("num_output: 4 kernel_size: 3", {2, 3, 6, 5}), Shape({2, 4, 4, 3}));
  EXPECT_EQ(this->TopShape("num_output: 4 kernel_size: 3 pad: 1 stride: 2", {2, 3, 7, 6}),
            Shape({2, 4, 4, 3}));
  // Extent of a dilated kernel: 2 (3 - 1) + 1 = 5.
  EXPECT_EQ(this->TopShape("num_output: 2 kernel_size: 3 dilation: 2", {1, 1, 9, 7}),
            Shape({1, 2, 5, 3}));
  EXPECT_EQ(this->TopShape("num_output: 2 kernel_h: 3 kernel_w: 1 pad_h: 1 stride_h: 2 stride_w: 1",
                           {1, 2, 6, 4}),
            Shape({1, 2, 3, 4}));
  EXPECT_EQ(
      this->TopShape("num_output: 2 kernel_size: 3 kernel_size: 1 pad: 0 pad: 1", {1, 2, 6, 4}),
      Shape({1, 2, 4, 6}));
  EXPECT_EQ(this->TopShape("num_output: 6 kernel_size: 1 group: 3", {2, 9, 4, 4}),
            Shape({2, 6, 4, 4}));
  EXPECT_EQ(this->layer_->blobs()[0]->shape(), Shape({6, 3, 1, 1}));
  EXPECT_EQ(this->layer_->blobs()[1]->shape(), Shape({6}));
  // Floor rounding: (8 + 0 - 3) / 2 + 1 = 3.
  EXPECT_EQ(this->TopShape("num_output: 1 kernel_size: 3 stride: 2 bias_term: false", {1, 1, 8, 8}),
            Shape({1, 1, 3, 3}));
  EXPECT_EQ(this->layer_->blobs().size(), 1u);
}

TYPED_TEST(ConvolutionLayerTest, ParameterErrors) {
  const Shape s = {1, 4, 5, 5};
  EXPECT_EQ(this->SetUpError("num_output: 2", s), "kernel_size must be given");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_h: 3", s),
            "kernel_h and kernel_w must be given together");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_size: 3 kernel_h: 3 kernel_w: 3", s),
            "give either kernel_size or kernel_h/kernel_w, not both");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_size: 1 kernel_size: 2 kernel_size: 3", s),
            "kernel_size must be given once or once per spatial axis (2), got 3 values");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_size: 0", s),
            "kernel size must be positive, got 0x0");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_size: 3 pad: 1 pad_h: 1", s),
            "give either pad or pad_h/pad_w, not both");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_size: 3 stride_h: 2", s),
            "stride_h and stride_w must be given together");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_size: 3 stride: 0", s),
            "stride must be positive, got 0x0");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_size: 3 dilation: 1 dilation: 0", s),
            "dilation must be positive, got 1x0");
  EXPECT_EQ(this->SetUpError("kernel_size: 3", s), "num_output must be positive");
  EXPECT_EQ(this->SetUpError("num_output: 3 kernel_size: 3 group: 2", s),
            "num_output (3) must be divisible by group (2)");
  EXPECT_EQ(this->SetUpError("num_output: 6 kernel_size: 3 group: 3", s),
            "channels (4) must be divisible by group (3)");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_size: 3 dilation: 2", {1, 4, 4, 6}),
            "output size below 1: input 4x6 with pad 0x0 is smaller than the dilated kernel 5x5");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_size: 3 axis: 2", s),
            "Convolution supports only axis 1 (channels), got axis 2");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_size: 3", {1, 4, 5, 5, 5}),
            "bottom 0 has 5 axes (3 spatial); only 2-D convolution (N, C, H, W) is supported, "
            "N-D convolution is not supported");
  EXPECT_EQ(this->SetUpError("num_output: 2 kernel_size: 3 weight_filler { type: 'nonsense' }", s)
                .rfind("weight_filler: ", 0),
            0u);
}

TYPED_TEST(ConvolutionLayerTest, NegativeChannelAxisIsAxisOne) {
  EXPECT_EQ(this->TopShape("num_output: 2 kernel_size: 3 axis: -3", {1, 2, 4, 4}),
            Shape({1, 2, 2, 2}));
}

TYPED_TEST(ConvolutionLayerTest, ReshapeChecksBottoms) {
  this->TopShape("num_output: 2 kernel_size: 3", {1, 2, 4, 4});
  this->bottoms_[0]->Reshape({1, 3, 4, 4});
  Status s = this->layer_->Reshape(this->bottoms_.vec(), this->tops_.vec());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "bottom 0 has 3 channels, but the layer was set up for 2");

  BlobSet bottoms;
  BlobSet tops;
  bottoms.Add({1, 2, 4, 4});
  bottoms.Add({1, 2, 5, 4});
  tops.Add({});
  tops.Add({});
  auto layer = MakeLayer(Conv("num_output: 2 kernel_size: 3"), TypeParam::kEngine);
  s = layer->SetUp(bottoms.vec(), tops.vec());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "all bottoms must have the same shape: bottom 1 is 1 2 5 4 (40), bottom 0 is 1 2 4 4 "
            "(32)");
}

const std::vector<float> kImage3x3 = {1, 2, 3, 4, 5, 6, 7, 8, 9};

TYPED_TEST(ConvolutionLayerTest, ForwardHandComputed) {
  // out(i, j) = sum w(a, b) x(i + a, j + b) + bias, w = [1 2; 3 4].
  EXPECT_EQ(
      this->Forward("num_output: 1 kernel_size: 2", {1, 1, 3, 3}, kImage3x3, {1, 2, 3, 4}, {1}),
      std::vector<float>({38, 48, 68, 78}));
  // Pad 1, stride 2, ones kernel: windows rows {-1,0},{1,2} x cols {-1,0},{1,2}.
  EXPECT_EQ(this->Forward("num_output: 1 kernel_size: 2 pad: 1 stride: 2 bias_term: false",
                          {1, 1, 3, 3}, kImage3x3, {1, 1, 1, 1}, {}),
            std::vector<float>({1, 5, 11, 28}));
  // Dilation 2: the kernel taps the four corners.
  EXPECT_EQ(this->Forward("num_output: 1 kernel_size: 2 dilation: 2", {1, 1, 3, 3}, kImage3x3,
                          {1, 2, 3, 4}, {-1}),
            std::vector<float>({63}));
  // Rectangular 1x2 kernel, stride_w 2 (pad_w 1).
  EXPECT_EQ(this->Forward("num_output: 1 kernel_h: 1 kernel_w: 2 stride_h: 1 stride_w: 2 pad_w: 1 "
                          "bias_term: false",
                          {1, 1, 3, 3}, kImage3x3, {10, 1}, {}),
            std::vector<float>({1, 23, 4, 56, 7, 89}));
}

TYPED_TEST(ConvolutionLayerTest, ForwardGroupsAndChannels) {
  // Two groups, 1x1 kernels: out0 = 2 x0, out1 = -x1 (+ bias).
  const std::vector<float> input = {1, 2, 3, 4, 10, 20, 30, 40};
  EXPECT_EQ(this->Forward("num_output: 2 kernel_size: 1 group: 2", {1, 2, 2, 2}, input, {2, -1},
                          {0.5, 0}),
            std::vector<float>({2.5, 4.5, 6.5, 8.5, -10, -20, -30, -40}));
  // No groups: each output sums both channels.
  EXPECT_EQ(this->Forward("num_output: 2 kernel_size: 1 bias_term: false", {1, 2, 2, 2}, input,
                          {1, 1, 1, -1}, {}),
            std::vector<float>({11, 22, 33, 44, -9, -18, -27, -36}));
}

TYPED_TEST(ConvolutionLayerTest, ForwardAfterShapeChange) {
  this->Forward("num_output: 1 kernel_size: 2", {1, 1, 3, 3}, kImage3x3, {1, 2, 3, 4}, {1});
  // Two images of 2x4 now: the fast path must rebuild its primitives.
  this->bottoms_[0]->Reshape({2, 1, 2, 4});
  ASSERT_TRUE(this->layer_->Reshape(this->bottoms_.vec(), this->tops_.vec()).ok());
  const std::vector<float> input = {1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 1, 1, 1, 1};
  std::copy(input.begin(), input.end(), this->bottoms_[0]->mutable_cpu_data());
  this->layer_->Forward(this->bottoms_.vec(), this->tops_.vec());
  ASSERT_EQ(this->tops_[0]->shape(), Shape({2, 1, 1, 3}));
  const std::vector<float> out(this->tops_[0]->cpu_data(), this->tops_[0]->cpu_data() + 6);
  EXPECT_EQ(out, std::vector<float>(
                     {1 + 4 + 15 + 24 + 1, 2 + 6 + 18 + 28 + 1, 3 + 8 + 21 + 32 + 1, 8, 8, 8}));
}

TYPED_TEST(ConvolutionLayerTest, GradientPlain) {
  this->CheckGradientsOf("num_output: 3 kernel_size: 3", {2, 3, 5, 5});
}

TYPED_TEST(ConvolutionLayerTest, GradientPadStrideDilation) {
  this->CheckGradientsOf("num_output: 2 kernel_size: 3 pad: 2 stride: 2 dilation: 2", {2, 3, 5, 6});
}

TYPED_TEST(ConvolutionLayerTest, GradientGroupsRectangular) {
  this->CheckGradientsOf("num_output: 4 kernel_h: 3 kernel_w: 2 pad_w: 1 group: 2", {2, 4, 5, 4});
}

TYPED_TEST(ConvolutionLayerTest, GradientPointwiseNoBias) {
  this->CheckGradientsOf("num_output: 3 kernel_size: 1 bias_term: false", {2, 3, 4, 3});
}

TYPED_TEST(ConvolutionLayerTest, GradientTwoBottoms) {
  BlobSet bottoms;
  BlobSet tops;
  BlobSet::FillGaussian(bottoms.Add({2, 2, 4, 4}), 3);
  BlobSet::FillGaussian(bottoms.Add({2, 2, 4, 4}), 4);
  tops.Add({});
  tops.Add({});
  auto layer = MakeLayer(GaussianConv("num_output: 2 kernel_size: 3 pad: 1"), TypeParam::kEngine);
  ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
  CheckGradients(*layer, bottoms.vec(), tops.vec());
}

// Param gradients are added to, never overwritten; bottom gradients overwritten.
TYPED_TEST(ConvolutionLayerTest, BackwardAccumulatesParamDiffs) {
  BlobSet bottoms;
  BlobSet tops;
  BlobSet::FillGaussian(bottoms.Add({2, 4, 6, 6}), 3);
  tops.Add({});
  auto layer = MakeLayer(GaussianConv("num_output: 16 kernel_size: 3 pad: 1"), TypeParam::kEngine);
  ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
  layer->Forward(bottoms.vec(), tops.vec());
  BlobSet::FillGaussian(tops[0], 5);
  std::copy(tops[0]->cpu_data(), tops[0]->cpu_data() + tops[0]->count(),
            tops[0]->mutable_cpu_diff());
  for (auto& p : layer->blobs()) p->SetDiffZero();
  layer->Backward(tops.vec(), {true}, bottoms.vec());
  std::vector<std::vector<float>> once;
  for (auto& p : layer->blobs()) once.emplace_back(p->cpu_diff(), p->cpu_diff() + p->count());
  const std::vector<float> bottom_once(bottoms[0]->cpu_diff(),
                                       bottoms[0]->cpu_diff() + bottoms[0]->count());
  layer->Backward(tops.vec(), {true}, bottoms.vec());
  for (size_t p = 0; p < once.size(); ++p) {
    std::vector<float> twice = once[p];
    for (float& v : twice) v *= 2;
    ExpectBlobsNear(twice.data(), layer->blobs()[p]->cpu_diff(), twice.size(), 1e-5f,
                    "param diff " + std::to_string(p));
  }
  ExpectBlobsNear(bottom_once.data(), bottoms[0]->cpu_diff(), bottom_once.size(), 1e-6f,
                  "bottom diff");
  // With param_propagate_down off the param diffs stay as they are.
  layer->set_param_propagate_down(0, false);
  layer->set_param_propagate_down(1, false);
  std::vector<float> before(layer->blobs()[0]->cpu_diff(),
                            layer->blobs()[0]->cpu_diff() + layer->blobs()[0]->count());
  layer->Backward(tops.vec(), {true}, bottoms.vec());
  ExpectBlobsNear(before.data(), layer->blobs()[0]->cpu_diff(), before.size(), 0.f, "frozen");
}

TYPED_TEST(ConvolutionLayerTest, PreloadedBlobsAreKept) {
  BlobSet bottoms;
  BlobSet tops;
  bottoms.Add({1, 2, 4, 4});
  tops.Add({});
  auto layer = MakeLayer(GaussianConv("num_output: 3 kernel_size: 3"), TypeParam::kEngine);
  layer->blobs().push_back(std::make_shared<Blob>(Shape{3, 2, 3, 3}));
  layer->blobs().push_back(std::make_shared<Blob>(Shape{3}));
  layer->blobs()[0]->mutable_cpu_data()[0] = 42.f;
  ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
  EXPECT_EQ(layer->blobs()[0]->cpu_data()[0], 42.f);

  auto wrong = MakeLayer(GaussianConv("num_output: 3 kernel_size: 3"), TypeParam::kEngine);
  wrong->blobs().push_back(std::make_shared<Blob>(Shape{3, 2, 5, 5}));
  wrong->blobs().push_back(std::make_shared<Blob>(Shape{3}));
  Status s = wrong->SetUp(bottoms.vec(), tops.vec());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "weight shape 3 2 5 5 (150) does not match the layer's 3 2 3 3 (54)");
}

// --- the fast path against the reference on realistic shapes -----------------

void FillUniform(const BlobVec& bottoms) {
  for (size_t i = 0; i < bottoms.size(); ++i) BlobSet::FillUniform(bottoms[i], 11 + i, -1.f, 1.f);
}

void ExpectAgree(const std::string& param, const Shape& shape, int num_bottoms = 1) {
  SCOPED_TRACE(param);
  const std::vector<Shape> shapes(num_bottoms, shape);
  ExpectEnginesAgree(GaussianConv(param), shapes, FillUniform, 1e-4f, num_bottoms);
  // The fast path must really run oneDNN here, not fall back.
  BlobSet bottoms;
  BlobSet tops;
  for (int i = 0; i < num_bottoms; ++i) {
    bottoms.Add(shape);
    tops.Add({});
  }
  auto layer = MakeLayer(GaussianConv(param), Engine::kFast);
  ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
  EXPECT_TRUE(static_cast<ConvolutionLayer*>(layer.get())->UsesDnnl());
}

TEST(ConvolutionEnginesTest, LeNetShapes) {
  ExpectAgree("num_output: 20 kernel_size: 5", {8, 1, 28, 28});
  ExpectAgree("num_output: 50 kernel_size: 5", {8, 20, 12, 12});
}

TEST(ConvolutionEnginesTest, CifarShapes) {
  ExpectAgree("num_output: 32 kernel_size: 5 pad: 2", {4, 3, 32, 32});
  ExpectAgree("num_output: 32 kernel_size: 5 pad: 2", {4, 32, 16, 16});
  ExpectAgree("num_output: 64 kernel_size: 5 pad: 2", {4, 32, 8, 8});
}

TEST(ConvolutionEnginesTest, GroupedDilatedStrided) {
  ExpectAgree("num_output: 32 kernel_size: 3 pad: 1 group: 4", {4, 16, 14, 14});
  ExpectAgree("num_output: 24 kernel_size: 3 pad: 1 group: 24", {2, 24, 9, 9});
  ExpectAgree("num_output: 16 kernel_size: 3 dilation: 2 pad: 2", {2, 8, 13, 11});
  ExpectAgree("num_output: 16 kernel_size: 3 stride: 2 pad: 1", {2, 8, 15, 12});
  ExpectAgree(
      "num_output: 8 kernel_h: 5 kernel_w: 3 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0 "
      "bias_term: false",
      {2, 6, 11, 9});
  ExpectAgree("num_output: 24 kernel_size: 1", {2, 16, 7, 7});
}

TEST(ConvolutionEnginesTest, TwoBottoms) {
  ExpectAgree("num_output: 16 kernel_size: 3 pad: 1", {2, 8, 6, 6}, 2);
}

}  // namespace
}  // namespace pstrain::testing

// Tests of Deconvolution and Crop: output shapes, parameter errors, forward
// against hand-computed values, Deconvolution against Convolution's backward
// on the same weights, finite-difference gradients on the reference and fast
// engines and (with a CUDA device) the GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain::testing {
namespace {

using Shape = std::vector<int>;

std::string Deconv(const std::string& param) {
  return "name: 'up' type: 'Deconvolution' convolution_param { " + param +
         " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } "
         "}";
}

std::string CropOf(const std::string& param) {
  return "name: 'crop' type: 'Crop' crop_param { " + param + " }";
}

// Sets `layer` up on bottoms of `shapes`; returns the set-up status.
struct Rig {
  BlobSet bottoms, tops;
  std::unique_ptr<Layer> layer;
  Status SetUp(const std::string& text, const std::vector<Shape>& shapes, Engine engine,
               int num_tops = 1) {
    for (const Shape& s : shapes) BlobSet::FillGaussian(bottoms.Add(s), 3 + bottoms.size());
    for (int t = 0; t < num_tops; ++t) tops.Add({});
    layer = MakeLayer(text, engine);
    // The GPU engine's instances test the layer's GPU path, not its CPU one.
    if (engine == Engine::kGpu) {
      EXPECT_TRUE(layer->HasGpuPath()) << layer->type();
    }
    return layer->SetUp(bottoms.vec(), tops.vec());
  }
  std::vector<float> Top(int i = 0) const {
    return std::vector<float>(tops[i]->cpu_data(), tops[i]->cpu_data() + tops[i]->count());
  }
};

std::string SetUpError(const std::string& text, const std::vector<Shape>& shapes) {
  Rig rig;
  Status s = rig.SetUp(text, shapes, Engine::kReference);
  EXPECT_FALSE(s.ok());
  return s.message();
}

template <typename EngineTag>
class DeconvolutionLayerTest : public LayerEngineTest<EngineTag> {};
TYPED_TEST_SUITE(DeconvolutionLayerTest, LayerEnginesWithGpu, EngineTagName);

TYPED_TEST(DeconvolutionLayerTest, OutputShapesAndParams) {
  Rig rig;
  // stride (in - 1) + kernel extent - 2 pad: 2 (5 - 1) + 4 - 2 = 10; 2 (3 - 1) + 4 - 2 = 6.
  ASSERT_TRUE(rig.SetUp(Deconv("num_output: 6 kernel_size: 4 stride: 2 pad: 1 group: 2"),
                        {{2, 4, 5, 3}}, TypeParam::kEngine)
                  .ok());
  EXPECT_EQ(rig.tops[0]->shape(), Shape({2, 6, 10, 6}));
  ASSERT_EQ(rig.layer->blobs().size(), 2u);
  EXPECT_EQ(rig.layer->blobs()[0]->shape(), Shape({4, 3, 4, 4}));  // channels, out / group
  EXPECT_EQ(rig.layer->blobs()[1]->shape(), Shape({6}));
  Rig dilated;
  ASSERT_TRUE(dilated
                  .SetUp(Deconv("num_output: 1 kernel_size: 3 dilation: 2 bias_term: false"),
                         {{1, 1, 4, 4}}, TypeParam::kEngine)
                  .ok());
  EXPECT_EQ(dilated.tops[0]->shape(), Shape({1, 1, 8, 8}));
  EXPECT_EQ(dilated.layer->blobs().size(), 1u);
}

TEST(DeconvolutionLayerErrorsTest, Messages) {
  EXPECT_EQ(SetUpError(Deconv("num_output: 2"), {{1, 2, 3, 3}}), "kernel_size must be given");
  EXPECT_EQ(SetUpError(Deconv("kernel_size: 2"), {{1, 2, 3, 3}}), "num_output must be positive");
  EXPECT_EQ(SetUpError(Deconv("num_output: 4 kernel_size: 2 group: 2"), {{1, 3, 3, 3}}),
            "channels (3) must be divisible by group (2)");
  EXPECT_EQ(SetUpError(Deconv("num_output: 3 kernel_size: 2 group: 2"), {{1, 4, 3, 3}}),
            "num_output (3) must be divisible by group (2)");
  EXPECT_EQ(SetUpError(Deconv("num_output: 1 kernel_size: 1 pad: 2"), {{1, 1, 3, 3}}),
            "output size below 1: input 3x3 with stride 1x1, kernel extent 1x1 and pad 2x2 gives "
            "-1x-1");
  EXPECT_EQ(SetUpError(Deconv("num_output: 1 kernel_size: 2"), {{1, 1, 3, 3, 3}}),
            "bottom 0 has 5 axes; only 2-D deconvolution (N, C, H, W) is supported");
}

// Sets weights (and bias) and runs a forward of one 1-channel image.
std::vector<float> DeconvForward(const std::string& param, Engine engine,
                                 const std::vector<float>& image, Shape shape,
                                 const std::vector<float>& weights, float bias) {
  Rig rig;
  EXPECT_TRUE(rig.SetUp(Deconv(param), {shape}, engine).ok());
  std::copy(image.begin(), image.end(), rig.bottoms[0]->mutable_cpu_data());
  std::copy(weights.begin(), weights.end(), rig.layer->blobs()[0]->mutable_cpu_data());
  rig.layer->blobs()[1]->mutable_cpu_data()[0] = bias;
  rig.layer->Forward(rig.bottoms.vec(), rig.tops.vec());
  return rig.Top();
}

TYPED_TEST(DeconvolutionLayerTest, ForwardHandComputed) {
  // Stride 2, 2x2 kernel: each input pixel paints x * W into its own 2x2 block.
  EXPECT_EQ(DeconvForward("num_output: 1 kernel_size: 2 stride: 2", TypeParam::kEngine,
                          {1, 2, 3, 4}, {1, 1, 2, 2}, {1, 2, 3, 4}, 1),
            std::vector<float>({2, 3, 3, 5, 4, 5, 7, 9, 4, 7, 5, 9, 10, 13, 13, 17}));
  // Stride 1: overlapping blocks add up (a full convolution).
  EXPECT_EQ(DeconvForward("num_output: 1 kernel_size: 2", TypeParam::kEngine, {1, 2, 3, 4},
                          {1, 1, 2, 2}, {1, 2, 3, 4}, 0),
            std::vector<float>({1, 4, 4, 6, 20, 16, 9, 24, 16}));
  // Pad 1 crops that full result to its centre.
  EXPECT_EQ(DeconvForward("num_output: 1 kernel_size: 2 pad: 1", TypeParam::kEngine, {1, 2, 3, 4},
                          {1, 1, 2, 2}, {1, 2, 3, 4}, 0),
            std::vector<float>({20}));
}

// Deconvolution's forward is Convolution's backward-data with the same
// weights, and its bottom gradient is Convolution's forward.
TYPED_TEST(DeconvolutionLayerTest, IsTheAdjointOfConvolution) {
  const std::string geometry = "kernel_size: 3 stride: 2 pad: 1 group: 2 bias_term: false";
  Rig deconv;
  ASSERT_TRUE(
      deconv.SetUp(Deconv("num_output: 4 " + geometry), {{2, 6, 4, 5}}, TypeParam::kEngine).ok());
  Rig conv;
  ASSERT_TRUE(conv.SetUp("name: 'c' type: 'Convolution' convolution_param { num_output: 6 " +
                             geometry + " }",
                         {deconv.tops[0]->shape()}, Engine::kReference)
                  .ok());
  ASSERT_EQ(conv.tops[0]->shape(), deconv.bottoms[0]->shape());
  conv.layer->blobs()[0]->CopyFrom(*deconv.layer->blobs()[0]);
  deconv.layer->Forward(deconv.bottoms.vec(), deconv.tops.vec());
  // Convolution's backward with the deconvolution's input as its top gradient.
  Blob* conv_top = conv.tops[0];
  std::copy(deconv.bottoms[0]->cpu_data(),
            deconv.bottoms[0]->cpu_data() + deconv.bottoms[0]->count(),
            conv_top->mutable_cpu_diff());
  conv.layer->Backward(conv.tops.vec(), {true}, conv.bottoms.vec());
  ExpectBlobsNear(conv.bottoms[0]->cpu_diff(), deconv.tops[0]->cpu_data(), deconv.tops[0]->count(),
                  1e-4f, "deconvolution forward");
  // And the deconvolution's bottom gradient is the convolution's forward.
  BlobSet::FillGaussian(deconv.tops[0], 9);
  std::copy(deconv.tops[0]->cpu_data(), deconv.tops[0]->cpu_data() + deconv.tops[0]->count(),
            deconv.tops[0]->mutable_cpu_diff());
  deconv.layer->Backward(deconv.tops.vec(), {true}, deconv.bottoms.vec());
  std::copy(deconv.tops[0]->cpu_diff(), deconv.tops[0]->cpu_diff() + deconv.tops[0]->count(),
            conv.bottoms[0]->mutable_cpu_data());
  conv.layer->Forward(conv.bottoms.vec(), conv.tops.vec());
  ExpectBlobsNear(conv.tops[0]->cpu_data(), deconv.bottoms[0]->cpu_diff(),
                  deconv.bottoms[0]->count(), 1e-4f, "deconvolution bottom gradient");
}

TYPED_TEST(DeconvolutionLayerTest, Gradients) {
  Rig rig;
  ASSERT_TRUE(rig.SetUp(Deconv("num_output: 4 kernel_size: 3 stride: 2 pad: 1 group: 2"),
                        {{2, 2, 3, 3}}, TypeParam::kEngine)
                  .ok());
  if (TypeParam::kEngine == Engine::kGpu) {
    EXPECT_TRUE(rig.layer->HasGpuPath());
  }
  CheckGradients(*rig.layer, rig.bottoms.vec(), rig.tops.vec());
}

TYPED_TEST(DeconvolutionLayerTest, GradientsTwoBottomsRectangular) {
  Rig rig;
  ASSERT_TRUE(
      rig.SetUp(Deconv("num_output: 3 kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2 pad_w: 1"),
                {{1, 2, 3, 2}, {1, 2, 3, 2}}, TypeParam::kEngine, 2)
          .ok());
  CheckGradients(*rig.layer, rig.bottoms.vec(), rig.tops.vec());
}

TEST(DeconvolutionEnginesTest, FastAndGpuAgreeWithReference) {
  auto fill = [](const BlobVec& b) { BlobSet::FillUniform(b[0], 5, -1.f, 1.f); };
  const std::string fcn_up = Deconv("num_output: 21 kernel_size: 4 stride: 2 bias_term: false");
  ExpectEnginesAgree(fcn_up, {{2, 21, 7, 7}}, fill, 1e-4f);
  ExpectEnginesAgree(Deconv("num_output: 8 kernel_size: 3 stride: 2 pad: 1"), {{2, 16, 6, 5}}, fill,
                     1e-4f);
  ExpectEnginesAgree(fcn_up, {{2, 21, 7, 7}}, fill, 1e-4f, 1, Engine::kGpu);
}

// --- Crop -----------------------------------------------------------------------

template <typename EngineTag>
class CropLayerTest : public LayerEngineTest<EngineTag> {};
TYPED_TEST_SUITE(CropLayerTest, LayerEnginesWithGpu, EngineTagName);

TYPED_TEST(CropLayerTest, ForwardHandComputed) {
  Rig rig;
  ASSERT_TRUE(
      rig.SetUp(CropOf("offset: 1 offset: 2"), {{1, 2, 4, 5}, {7, 7, 2, 3}}, TypeParam::kEngine)
          .ok());
  EXPECT_EQ(rig.tops[0]->shape(), Shape({1, 2, 2, 3}));  // axes before 2 keep bottom 0's size
  float* x = rig.bottoms[0]->mutable_cpu_data();
  for (int i = 0; i < 40; ++i) x[i] = static_cast<float>(i);
  rig.layer->Forward(rig.bottoms.vec(), rig.tops.vec());
  // Rows 1-2, columns 2-4 of each 4x5 channel.
  EXPECT_EQ(rig.Top(), std::vector<float>({7, 8, 9, 12, 13, 14, 27, 28, 29, 32, 33, 34}));

  Rig axis1;  // one offset for every axis from 1 on
  ASSERT_TRUE(
      axis1.SetUp(CropOf("axis: 1 offset: 1"), {{2, 3, 3, 3}, {1, 1, 2, 2}}, TypeParam::kEngine)
          .ok());
  EXPECT_EQ(axis1.tops[0]->shape(), Shape({2, 1, 2, 2}));
  float* y = axis1.bottoms[0]->mutable_cpu_data();
  for (int i = 0; i < 54; ++i) y[i] = static_cast<float>(i);
  axis1.layer->Forward(axis1.bottoms.vec(), axis1.tops.vec());
  EXPECT_EQ(axis1.Top(), std::vector<float>({13, 14, 16, 17, 40, 41, 43, 44}));
}

TYPED_TEST(CropLayerTest, BackwardPutsTheGradientBack) {
  Rig rig;
  ASSERT_TRUE(rig.SetUp(CropOf("axis: -1 offset: 1"), {{2, 4}, {2, 2}}, TypeParam::kEngine).ok());
  rig.layer->Forward(rig.bottoms.vec(), rig.tops.vec());
  float* dy = rig.tops[0]->mutable_cpu_diff();
  for (int i = 0; i < 4; ++i) dy[i] = static_cast<float>(i + 1);
  std::fill(rig.bottoms[0]->mutable_cpu_diff(), rig.bottoms[0]->mutable_cpu_diff() + 8, 9.f);
  rig.layer->Backward(rig.tops.vec(), {true, false}, rig.bottoms.vec());
  const float* dx = rig.bottoms[0]->cpu_diff();
  EXPECT_EQ(std::vector<float>(dx, dx + 8), std::vector<float>({0, 1, 2, 0, 0, 3, 4, 0}));
  EXPECT_FALSE(rig.layer->AllowForceBackward(1));
}

TYPED_TEST(CropLayerTest, Gradients) {
  Rig rig;
  ASSERT_TRUE(
      rig.SetUp(CropOf("offset: 0 offset: 1"), {{2, 3, 4, 4}, {1, 1, 3, 2}}, TypeParam::kEngine)
          .ok());
  if (TypeParam::kEngine == Engine::kGpu) {
    EXPECT_TRUE(rig.layer->HasGpuPath());
  }
  CheckGradients(*rig.layer, rig.bottoms.vec(), rig.tops.vec());
}

TEST(CropLayerErrorsTest, Messages) {
  EXPECT_EQ(SetUpError(CropOf("offset: 2"), {{1, 1, 4, 4}, {1, 1, 3, 3}}),
            "the crop of axis 2 does not fit: offset 2 + size 3 (bottom 1) is past bottom 0's 4 "
            "(bottom 0 1 1 4 4 (16), bottom 1 1 1 3 3 (9))");
  EXPECT_EQ(SetUpError(CropOf("axis: 4"), {{1, 1, 4, 4}, {1, 1, 3, 3}}),
            "crop_param.axis 4 is outside bottom 0's 4 axes (1 1 4 4 (16))");
  EXPECT_EQ(SetUpError(CropOf("offset: 1 offset: 1 offset: 1"), {{1, 1, 4, 4}, {1, 1, 3, 3}}),
            "crop_param.offset has 3 values; give one, or one per cropped axis (2: axes 2 to 3)");
  EXPECT_EQ(SetUpError(CropOf(""), {{1, 1, 4, 4}, {3, 3}}),
            "bottom 1 (3 3 (9)) must have the 4 axes of bottom 0 (1 1 4 4 (16))");
}

}  // namespace
}  // namespace pstrain::testing

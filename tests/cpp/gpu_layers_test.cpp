// Tests of the layers' GPU paths (Engine::kGpu): each layer against its
// reference path on realistic shapes (tops, bottom and param gradients,
// relative error under 1e-4), finite-difference gradient checks on the GPU
// for a few, and the GPU-only behaviour (dropout's mask equal to the CPU's, the
// loss layers' label errors, BatchNorm's running statistics). Every test is
// skipped, with the reason, where there is no CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain::testing {
namespace {

using Shape = std::vector<int>;
constexpr float kTolerance = 1e-4f;

void Gaussian(const BlobVec& b) {
  for (size_t i = 0; i < b.size(); ++i) BlobSet::FillGaussian(b[i], 100 + i);
}

// Distinct values in a shuffled order: no ties for MAX operations, and a
// finite-difference step never changes a maximum.
void FillDistinct(Blob* blob, uint64_t seed) {
  std::vector<int> order(blob->count());
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed);
  std::shuffle(order.begin(), order.end(), rng.engine());
  float* d = blob->mutable_cpu_data();
  for (int64_t i = 0; i < blob->count(); ++i) d[i] = 0.05f * static_cast<float>(order[i]) - 3.f;
}

void Distinct(const BlobVec& b) {
  for (size_t i = 0; i < b.size(); ++i) FillDistinct(b[i], 200 + i);
}

// Scores (gaussian) and integer labels in [0, classes), with every
// `ignore_every`-th label set to `ignore` when ignore_every > 0.
auto ScoresAndLabels(int classes, int ignore_every = 0, float ignore = -1.f) {
  return [=](const BlobVec& b) {
    BlobSet::FillGaussian(b[0], 31, 2.f);
    Rng rng(32);
    float* label = b[1]->mutable_cpu_data();
    for (int64_t i = 0; i < b[1]->count(); ++i) {
      label[i] = static_cast<float>(rng.Below(classes));
      if (ignore_every > 0 && i % ignore_every == 0) label[i] = ignore;
    }
  };
}

void AgreeOnGpu(const std::string& layer, const std::vector<Shape>& shapes,
                const std::function<void(const BlobVec&)>& fill = Gaussian, int num_tops = 1) {
  ExpectEnginesAgree(layer, shapes, fill, kTolerance, num_tops, Engine::kGpu);
}

// Sets up `layer` on the GPU with `shapes` filled by `fill`, then checks its
// gradients by finite differences.
void CheckGpuGradients(const std::string& layer, const std::vector<Shape>& shapes,
                       const std::function<void(const BlobVec&)>& fill,
                       const GradientCheckOptions& options = {}, int num_tops = 1) {
  BlobSet bottoms, tops;
  for (const Shape& s : shapes) bottoms.Add(s);
  for (int t = 0; t < num_tops; ++t) tops.Add({});
  fill(bottoms.vec());
  auto l = MakeLayer(layer, Engine::kGpu);
  ASSERT_NE(l, nullptr);
  const Status s = l->SetUp(bottoms.vec(), tops.vec());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(l->HasGpuPath());
  CheckGradients(*l, bottoms.vec(), tops.vec(), options);
}

std::string Conv(const std::string& param) {
  return "name: 'conv' type: 'Convolution' convolution_param { " + param +
         " weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'gaussian' std: 0.5 } }";
}
std::string Pool(const std::string& param) {
  return "name: 'pool' type: 'Pooling' pooling_param { " + param + " }";
}
std::string Lrn(const std::string& param) {
  return "name: 'norm' type: 'LRN' lrn_param { " + param + " }";
}

// --- cuDNN layers -------------------------------------------------------------

TEST(GpuLayersTest, ConvolutionAgrees) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu(Conv("num_output: 32 kernel_size: 3 pad: 1"), {{4, 16, 20, 20}});
  AgreeOnGpu(Conv("num_output: 24 kernel_size: 5 stride: 2 pad: 2"), {{2, 3, 31, 29}});
  AgreeOnGpu(Conv("num_output: 8 kernel_size: 1 bias_term: false"), {{2, 12, 9, 9}});
}

TEST(GpuLayersTest, ConvolutionGroupsDilationTwoBottomsAgree) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu(Conv("num_output: 12 kernel_size: 3 group: 4 dilation: 2 stride: 2 pad: 1"),
             {{2, 8, 15, 17}});
  AgreeOnGpu(Conv("num_output: 6 kernel_h: 3 kernel_w: 2 pad_h: 1 pad_w: 0"),
             {{2, 4, 7, 8}, {2, 4, 7, 8}}, Gaussian, 2);
}

TEST(GpuLayersTest, ConvolutionGradients) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  CheckGpuGradients(Conv("num_output: 4 kernel_size: 3 group: 2 pad: 1 stride: 2"), {{2, 4, 5, 6}},
                    Gaussian);
}

TEST(GpuLayersTest, ConvolutionFollowsShapeChanges) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  BlobSet gpu_bottoms, gpu_tops, ref_bottoms, ref_tops;
  gpu_bottoms.Add({2, 3, 8, 8});
  ref_bottoms.Add({2, 3, 8, 8});
  gpu_tops.Add({});
  ref_tops.Add({});
  auto gpu = MakeLayer(Conv("num_output: 4 kernel_size: 3"), Engine::kGpu);
  auto ref = MakeLayer(Conv("num_output: 4 kernel_size: 3"), Engine::kReference);
  ASSERT_TRUE(gpu->SetUp(gpu_bottoms.vec(), gpu_tops.vec()).ok());
  ASSERT_TRUE(ref->SetUp(ref_bottoms.vec(), ref_tops.vec()).ok());
  for (size_t p = 0; p < ref->blobs().size(); ++p) gpu->blobs()[p]->CopyFrom(*ref->blobs()[p]);
  for (const Shape& shape : {Shape{2, 3, 8, 8}, Shape{3, 3, 11, 7}, Shape{1, 3, 5, 5}}) {
    gpu_bottoms[0]->Reshape(shape);
    ref_bottoms[0]->Reshape(shape);
    BlobSet::FillGaussian(gpu_bottoms[0], 5);
    BlobSet::FillGaussian(ref_bottoms[0], 5);
    ASSERT_TRUE(gpu->Reshape(gpu_bottoms.vec(), gpu_tops.vec()).ok());
    ASSERT_TRUE(ref->Reshape(ref_bottoms.vec(), ref_tops.vec()).ok());
    gpu->Forward(gpu_bottoms.vec(), gpu_tops.vec());
    ref->Forward(ref_bottoms.vec(), ref_tops.vec());
    ASSERT_EQ(gpu_tops[0]->shape(), ref_tops[0]->shape());
    ExpectBlobsNear(ref_tops[0]->cpu_data(), gpu_tops[0]->cpu_data(), ref_tops[0]->count(),
                    kTolerance, "top for bottom " + gpu_bottoms[0]->shape_string());
  }
}

TEST(GpuLayersTest, MaxPoolingAgrees) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu(Pool("pool: MAX kernel_size: 3 stride: 2"), {{4, 16, 13, 13}}, Distinct);
  AgreeOnGpu(Pool("pool: MAX kernel_size: 3 stride: 2 pad: 1"), {{2, 8, 12, 11}}, Distinct);
  AgreeOnGpu(Pool("pool: MAX kernel_size: 2 stride: 2"), {{2, 8, 12, 12}}, Distinct, 2);
  AgreeOnGpu(Pool("pool: MAX kernel_size: 3 stride: 2 round_mode: FLOOR"), {{2, 4, 10, 9}},
             Distinct);
}

TEST(GpuLayersTest, AvePoolingAgrees) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  // cuDNN: windows inside the input, or inside [-pad, in + pad).
  AgreeOnGpu(Pool("pool: AVE kernel_size: 3 stride: 2"), {{4, 16, 13, 13}});
  AgreeOnGpu(Pool("pool: AVE kernel_size: 3 stride: 1 pad: 1"), {{2, 8, 9, 10}});
  AgreeOnGpu(Pool("pool: AVE global_pooling: true"), {{4, 32, 7, 7}});
  // Own kernels: Caffe's ceil rounding runs the last window past in + pad.
  AgreeOnGpu(Pool("pool: AVE kernel_size: 3 stride: 2 pad: 1"), {{2, 8, 6, 6}});
  AgreeOnGpu(Pool("pool: AVE kernel_size: 3 stride: 2"), {{2, 8, 12, 12}});
}

TEST(GpuLayersTest, PoolingGradients) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  CheckGpuGradients(Pool("pool: MAX kernel_size: 3 stride: 2 pad: 1"), {{2, 3, 7, 6}}, Distinct);
  CheckGpuGradients(Pool("pool: AVE kernel_size: 3 stride: 2 pad: 1"), {{2, 3, 6, 6}}, Gaussian);
}

TEST(GpuLayersTest, LrnAgrees) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const auto positive = [](const BlobVec& b) { BlobSet::FillUniform(b[0], 11, 0.f, 200.f); };
  AgreeOnGpu(Lrn("local_size: 5 alpha: 0.0001 beta: 0.75"), {{2, 96, 27, 27}}, positive);
  AgreeOnGpu(Lrn("local_size: 3 alpha: 0.5 beta: 0.75 k: 2"), {{2, 16, 9, 9}});
  // Own kernels: a window wider than cuDNN allows, and WITHIN_CHANNEL.
  AgreeOnGpu(Lrn("local_size: 17 alpha: 0.3 beta: 0.75"), {{2, 24, 5, 5}});
  AgreeOnGpu(Lrn("local_size: 5 alpha: 0.5 beta: 0.75 norm_region: WITHIN_CHANNEL"),
             {{2, 8, 13, 11}});
}

TEST(GpuLayersTest, LrnGradients) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  CheckGpuGradients(Lrn("local_size: 3 alpha: 0.5 beta: 0.75"), {{2, 5, 3, 3}}, Gaussian);
  CheckGpuGradients(Lrn("local_size: 3 alpha: 0.5 beta: 0.75 norm_region: WITHIN_CHANNEL"),
                    {{2, 2, 4, 4}}, Gaussian);
}

TEST(GpuLayersTest, SoftmaxAgrees) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu("name: 'prob' type: 'Softmax'", {{64, 10}});
  AgreeOnGpu("name: 'prob' type: 'Softmax'", {{2, 7, 5, 4}});
  AgreeOnGpu("name: 'prob' type: 'Softmax' softmax_param { axis: 2 }", {{3, 4, 6, 2}});
}

// In place (bottom == top) the GPU path runs its own kernels.
TEST(GpuLayersTest, SoftmaxInPlaceMatchesReference) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  BlobSet blobs[2];
  const Engine engines[2] = {Engine::kReference, Engine::kGpu};
  for (int e = 0; e < 2; ++e) {
    Blob* blob = blobs[e].Add({4, 6, 3});
    BlobSet::FillGaussian(blob, 9);
    auto layer = MakeLayer("name: 'prob' type: 'Softmax'", engines[e]);
    ASSERT_TRUE(layer->SetUp(blobs[e].vec(), blobs[e].vec()).ok());
    layer->Forward(blobs[e].vec(), blobs[e].vec());
    Rng rng(10);
    float* diff = blob->mutable_cpu_diff();
    for (int64_t i = 0; i < blob->count(); ++i) diff[i] = rng.Uniform(-1.f, 1.f);
    layer->Backward(blobs[e].vec(), {true}, blobs[e].vec());
  }
  ExpectBlobsNear(blobs[0][0]->cpu_data(), blobs[1][0]->cpu_data(), blobs[0][0]->count(),
                  kTolerance, "in-place top");
  ExpectBlobsNear(blobs[0][0]->cpu_diff(), blobs[1][0]->cpu_diff(), blobs[0][0]->count(),
                  kTolerance, "in-place bottom diff");
}

TEST(GpuLayersTest, NeuronLayersAgree) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu("name: 'relu' type: 'ReLU'", {{8, 16, 7, 7}});
  AgreeOnGpu("name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.1 }", {{8, 16, 7, 7}});
  AgreeOnGpu("name: 'sig' type: 'Sigmoid'", {{8, 100}});
  AgreeOnGpu("name: 'tanh' type: 'TanH'", {{8, 100}});
}

// --- cuBLAS and own kernels ------------------------------------------------------

TEST(GpuLayersTest, InnerProductAgrees) {
  const std::string fillers =
      " weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'gaussian' std: 1 } ";
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu("name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 30" + fillers + "}",
             {{16, 8, 5, 5}});
  AgreeOnGpu(
      "name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 30 "
      "transpose: true" +
          fillers + "}",
      {{16, 50}});
  AgreeOnGpu("name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 7" + fillers + "}",
             {{1, 40}});
  AgreeOnGpu(
      "name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 5 axis: 2 "
      "bias_term: false" +
          fillers + "}",
      {{3, 4, 6}});
}

TEST(GpuLayersTest, InnerProductGradients) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  CheckGpuGradients(
      "name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 4 "
      "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 1 } }",
      {{3, 5}}, Gaussian);
}

TEST(GpuLayersTest, BatchNormAgrees) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu("name: 'bn' type: 'BatchNorm' phase: TRAIN", {{4, 16, 8, 8}},
             [](const BlobVec& b) { BlobSet::FillGaussian(b[0], 21, 3.f); });
  AgreeOnGpu("name: 'bn' type: 'BatchNorm' phase: TRAIN", {{32, 10}});
  AgreeOnGpu("name: 'bn' type: 'BatchNorm' phase: TEST", {{4, 16, 8, 8}});
}

// Two training steps then a global-statistics pass on both engines: the
// running sums and normaliser, and the global-statistics top, agree.
TEST(GpuLayersTest, BatchNormRunningStatisticsAgree) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  BlobSet bottoms[2], tops[2];
  std::unique_ptr<Layer> layers[2];
  const Engine engines[2] = {Engine::kReference, Engine::kGpu};
  for (int e = 0; e < 2; ++e) {
    bottoms[e].Add({6, 3, 4, 5});
    tops[e].Add({});
    layers[e] = MakeLayer(
        "name: 'bn' type: 'BatchNorm' phase: TRAIN batch_norm_param { "
        "moving_average_fraction: 0.9 }",
        engines[e]);
    ASSERT_TRUE(layers[e]->SetUp(bottoms[e].vec(), tops[e].vec()).ok());
    for (uint64_t step = 0; step < 2; ++step) {
      BlobSet::FillGaussian(bottoms[e][0], 40 + step, 2.f);
      layers[e]->Forward(bottoms[e].vec(), tops[e].vec());
    }
  }
  for (size_t p = 0; p < 3; ++p) {
    ExpectBlobsNear(layers[0]->blobs()[p]->cpu_data(), layers[1]->blobs()[p]->cpu_data(),
                    layers[0]->blobs()[p]->count(), kTolerance, "blob " + std::to_string(p));
  }
  EXPECT_FLOAT_EQ(layers[1]->blobs()[2]->cpu_data()[0], 1.9f);
}

TEST(GpuLayersTest, BatchNormGradients) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  GradientCheckOptions options;
  options.check_params = false;  // statistics, not learned
  CheckGpuGradients("name: 'bn' type: 'BatchNorm' phase: TRAIN", {{3, 2, 2, 3}}, Gaussian, options);
}

TEST(GpuLayersTest, ScaleAndBiasAgree) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu(
      "name: 's' type: 'Scale' scale_param { bias_term: true filler { type: 'gaussian' } "
      "bias_filler { type: 'gaussian' } }",
      {{4, 8, 5, 5}});
  AgreeOnGpu("name: 's' type: 'Scale' scale_param { axis: 0 }", {{4, 8, 5}, {4, 8}});
  AgreeOnGpu("name: 'b' type: 'Bias' bias_param { filler { type: 'gaussian' } }", {{4, 8, 5, 5}});
  AgreeOnGpu("name: 'b' type: 'Bias' bias_param { axis: 1 }", {{4, 8, 5}, {8, 5}});
}

TEST(GpuLayersTest, ScaleGradients) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  CheckGpuGradients(
      "name: 's' type: 'Scale' scale_param { bias_term: true filler { type: 'gaussian' } "
      "bias_filler { type: 'gaussian' } }",
      {{2, 3, 2, 2}}, Gaussian);
}

TEST(GpuLayersTest, EltwiseAgrees) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const std::vector<Shape> three = {{4, 8, 6, 6}, {4, 8, 6, 6}, {4, 8, 6, 6}};
  AgreeOnGpu(
      "name: 'e' type: 'Eltwise' eltwise_param { operation: SUM coeff: 1 coeff: -0.5 "
      "coeff: 2 }",
      three);
  AgreeOnGpu("name: 'e' type: 'Eltwise' eltwise_param { operation: PROD }", three);
  AgreeOnGpu("name: 'e' type: 'Eltwise' eltwise_param { operation: PROD stable_prod_grad: false }",
             three, [](const BlobVec& b) {
               for (size_t i = 0; i < b.size(); ++i) BlobSet::FillUniform(b[i], 50 + i, 0.5f, 2.f);
             });
  AgreeOnGpu("name: 'e' type: 'Eltwise' eltwise_param { operation: MAX }", three, Distinct);
}

TEST(GpuLayersTest, ConcatSliceSplitAgree) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu("name: 'c' type: 'Concat'", {{2, 3, 4, 5}, {2, 6, 4, 5}, {2, 1, 4, 5}});
  AgreeOnGpu("name: 'c' type: 'Concat' concat_param { axis: 0 }", {{2, 3, 4}, {5, 3, 4}});
  AgreeOnGpu("name: 'c' type: 'Concat' concat_param { axis: -1 }", {{2, 3, 4}, {2, 3, 1}});
  AgreeOnGpu("name: 's' type: 'Slice' slice_param { slice_point: 2 slice_point: 7 }",
             {{3, 10, 4, 2}}, Gaussian, 3);
  AgreeOnGpu("name: 's' type: 'Slice' slice_param { axis: 2 }", {{3, 4, 6}}, Gaussian, 2);
  AgreeOnGpu("name: 's' type: 'Split'", {{4, 5, 6}}, Gaussian, 3);
  AgreeOnGpu("name: 'f' type: 'Flatten'", {{4, 5, 3, 2}});
  AgreeOnGpu("name: 'r' type: 'Reshape' reshape_param { shape { dim: 0 dim: -1 dim: 2 } }",
             {{4, 5, 3, 2}});
}

TEST(GpuLayersTest, DropoutTestPhaseIsIdentity) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu("name: 'd' type: 'Dropout' phase: TEST dropout_param { dropout_ratio: 0.3 }",
             {{8, 50}});
}

// TRAIN: the GPU draws the reference path's mask bit for bit (the same
// function of the sample's stream position and the element), forward and
// backward, out of place and in place; about `ratio` of the elements are
// zeroed; without a data source the next forward draws the next batch's mask
// on both paths.
TEST(GpuLayersTest, DropoutTrainMaskIsTheReferenceMask) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const std::string param =
      "name: 'd' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.3 }";
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "out of place");
    std::vector<float> y[2], dx[2], second[2];
    const Engine engines[2] = {Engine::kReference, Engine::kGpu};
    for (int e = 0; e < 2; ++e) {
      BlobSet blobs;
      Blob* bottom = blobs.Add({100, 100});
      Blob* top = in_place ? bottom : blobs.Add({});
      BlobSet::FillUniform(bottom, 3, 1.f, 2.f);
      auto layer = MakeLayer(param, engines[e]);
      ASSERT_TRUE(layer->SetUp({bottom}, {top}).ok());
      layer->set_forward_context(ForwardContext{12345});
      layer->Forward({bottom}, {top});
      y[e].assign(top->cpu_data(), top->cpu_data() + top->count());
      std::fill(top->mutable_cpu_diff(), top->mutable_cpu_diff() + top->count(), 1.f);
      layer->Backward({top}, {true}, {bottom});
      dx[e].assign(bottom->cpu_diff(), bottom->cpu_diff() + bottom->count());
      layer->set_forward_context(ForwardContext{});
      BlobSet::FillUniform(bottom, 3, 1.f, 2.f);
      layer->Forward({bottom}, {top});
      second[e].assign(top->cpu_data(), top->cpu_data() + top->count());
    }
    EXPECT_EQ(y[1], y[0]);
    EXPECT_EQ(dx[1], dx[0]);
    EXPECT_EQ(second[1], second[0]);
    EXPECT_NE(second[1], y[1]);
    int64_t dropped = 0;
    for (size_t i = 0; i < y[1].size(); ++i) {
      dropped += y[1][i] == 0.f;
      ASSERT_FLOAT_EQ(dx[1][i], y[1][i] == 0.f ? 0.f : 1.f / 0.7f) << i;
    }
    EXPECT_NEAR(static_cast<double>(dropped) / y[1].size(), 0.3, 0.02);
  }
}

// --- loss layers ------------------------------------------------------------------

TEST(GpuLayersTest, SoftmaxWithLossAgrees) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu("name: 'loss' type: 'SoftmaxWithLoss'", {{64, 10}, {64}}, ScoresAndLabels(10));
  AgreeOnGpu("name: 'loss' type: 'SoftmaxWithLoss' loss_param { ignore_label: 2 }",
             {{2, 5, 3, 4}, {2, 3, 4}}, ScoresAndLabels(5, 3, 2.f), 2);
  AgreeOnGpu(
      "name: 'loss' type: 'SoftmaxWithLoss' loss_param { ignore_label: -1 normalization: "
      "BATCH_SIZE }",
      {{4, 6, 5}, {4, 5}}, ScoresAndLabels(6, 4, -1.f));
  AgreeOnGpu("name: 'loss' type: 'SoftmaxWithLoss' loss_param { normalization: FULL }",
             {{4, 6, 5}, {4, 5}}, ScoresAndLabels(6));
}

TEST(GpuLayersTest, SoftmaxWithLossGradients) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  CheckGpuGradients("name: 'loss' type: 'SoftmaxWithLoss' loss_param { ignore_label: 1 }",
                    {{3, 4, 2}, {3, 2}}, ScoresAndLabels(4, 4, 1.f));
}

// A label out of range: the same NaN loss and RuntimeStatus message as the
// reference, and the next good batch clears it.
TEST(GpuLayersTest, SoftmaxWithLossReportsBadLabelsLikeReference) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  std::string messages[2];
  float losses[2];
  const Engine engines[2] = {Engine::kReference, Engine::kGpu};
  for (int e = 0; e < 2; ++e) {
    BlobSet bottoms, tops;
    bottoms.Add({5, 3});
    bottoms.Add({5});
    tops.Add({});
    ScoresAndLabels(3)(bottoms.vec());
    bottoms[1]->mutable_cpu_data()[2] = 7.f;
    bottoms[1]->mutable_cpu_data()[4] = -3.f;
    auto layer = MakeLayer("name: 'loss' type: 'SoftmaxWithLoss'", engines[e]);
    ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
    layer->Forward(bottoms.vec(), tops.vec());
    losses[e] = tops[0]->cpu_data()[0];
    messages[e] = layer->RuntimeStatus().message();
    ScoresAndLabels(3)(bottoms.vec());
    layer->Forward(bottoms.vec(), tops.vec());
    EXPECT_TRUE(layer->RuntimeStatus().ok());
  }
  EXPECT_TRUE(std::isnan(losses[0]));
  EXPECT_TRUE(std::isnan(losses[1]));
  EXPECT_FALSE(messages[0].empty());
  EXPECT_EQ(messages[1], messages[0]);
}

TEST(GpuLayersTest, EuclideanAndSigmoidCrossEntropyLossAgree) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  AgreeOnGpu("name: 'loss' type: 'EuclideanLoss'", {{16, 5, 2}, {16, 10}});
  const auto targets = [](const BlobVec& b) {
    BlobSet::FillGaussian(b[0], 61, 3.f);
    BlobSet::FillUniform(b[1], 62, 0.f, 1.f);
    for (int64_t i = 0; i < b[1]->count(); i += 5) b[1]->mutable_cpu_data()[i] = -1.f;
  };
  AgreeOnGpu("name: 'loss' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: -1 }",
             {{8, 6}, {8, 6}}, targets);
  AgreeOnGpu("name: 'loss' type: 'SigmoidCrossEntropyLoss'", {{8, 3, 2}, {8, 3, 2}}, targets);
}

}  // namespace
}  // namespace pstrain::testing

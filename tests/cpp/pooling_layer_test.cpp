// Tests of PoolingLayer on both engines: Caffe's output-size rounding,
// parameter errors, hand-computed MAX/AVE forward cases (with Caffe's AVE
// divisor at the padded border), the mask top, gradient checks, and
// reference/vector/oneDNN agreement on realistic shapes (tests/cpp/
// cpu_kernels_test.cpp holds the vector kernels to the reference on many more).
#include "worker/layers/pooling_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain::testing {
namespace {

using Shape = std::vector<int>;
using Values = std::vector<float>;

std::string Pool(const std::string& pooling_param) {
  return "name: 'pool' type: 'Pooling' pooling_param { " + pooling_param + " }";
}

// Distinct values 0.1 apart in a shuffled order: no ties, and finite-difference
// steps never change which element is a window's maximum.
void FillDistinct(Blob* blob, uint64_t seed) {
  std::vector<int> order(blob->count());
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed);
  std::shuffle(order.begin(), order.end(), rng.engine());
  float* d = blob->mutable_cpu_data();
  for (int64_t i = 0; i < blob->count(); ++i) d[i] = 0.1f * static_cast<float>(order[i]) - 2.f;
}

// x[h][w] = 4 h + w + 1 on a 4x4 plane.
Values Plane4x4() {
  Values v(16);
  std::iota(v.begin(), v.end(), 1.f);
  return v;
}

template <typename EngineTag>
class PoolingLayerTest : public ::testing::Test {
 protected:
  // Sets up on one bottom of `shape` (and `num_tops` tops); returns top 0's shape.
  Shape TopShape(const std::string& param, const Shape& shape, int num_tops = 1) {
    bottoms_ = BlobSet();
    tops_ = BlobSet();
    bottoms_.Add(shape);
    for (int t = 0; t < num_tops; ++t) tops_.Add({});
    layer_ = MakeLayer(Pool(param), EngineTag::kEngine);
    Status s = layer_->SetUp(bottoms_.vec(), tops_.vec());
    EXPECT_TRUE(s.ok()) << s.message();
    return tops_[0]->shape();
  }

  std::string SetUpError(const std::string& param, const Shape& shape, int num_tops = 1) {
    BlobSet bottoms;
    BlobSet tops;
    bottoms.Add(shape);
    for (int t = 0; t < num_tops; ++t) tops.Add({});
    auto layer = MakeLayer(Pool(param), EngineTag::kEngine);
    Status s = layer->SetUp(bottoms.vec(), tops.vec());
    EXPECT_FALSE(s.ok());
    return s.message();
  }

  Values Forward(const std::string& param, const Shape& shape, const Values& input,
                 int num_tops = 1) {
    TopShape(param, shape, num_tops);
    std::copy(input.begin(), input.end(), bottoms_[0]->mutable_cpu_data());
    layer_->Forward(bottoms_.vec(), tops_.vec());
    return Values(tops_[0]->cpu_data(), tops_[0]->cpu_data() + tops_[0]->count());
  }

  void CheckGradientsOf(const std::string& param, const Shape& shape, int num_tops = 1) {
    BlobSet bottoms;
    BlobSet tops;
    FillDistinct(bottoms.Add(shape), 3);
    for (int t = 0; t < num_tops; ++t) tops.Add({});
    auto layer = MakeLayer(Pool(param), EngineTag::kEngine);
    Status s = layer->SetUp(bottoms.vec(), tops.vec());
    ASSERT_TRUE(s.ok()) << s.message();
    // With the mask top in the objective too: its values do not move under the
    // small steps (the argmaxes stay), so its numeric gradient is zero, as is
    // its analytic one (Backward ignores the mask's diff).
    GradientCheckOptions options;
    options.step = 1e-3f;
    options.threshold = 1e-2f;
    CheckGradients(*layer, bottoms.vec(), tops.vec(), options);
  }

  BlobSet bottoms_;
  BlobSet tops_;
  std::unique_ptr<Layer> layer_;
};

TYPED_TEST_SUITE(PoolingLayerTest, LayerEngines);

TYPED_TEST(PoolingLayerTest, OutputSizeRounding) {
  // ceil((6 - 3) / 2) + 1 = 3; FLOOR gives 2.
  EXPECT_EQ(this->TopShape("kernel_size: 3 stride: 2", {2, 3, 6, 6}), Shape({2, 3, 3, 3}));
  EXPECT_EQ(this->TopShape("kernel_size: 3 stride: 2 round_mode: FLOOR", {2, 3, 6, 6}),
            Shape({2, 3, 2, 2}));
  // Pad 1: ceil((6 + 2 - 3) / 2) + 1 = 4; the last window starts at 5 < 6 + 1: kept.
  EXPECT_EQ(this->TopShape("kernel_size: 3 stride: 2 pad: 1", {1, 1, 6, 6}), Shape({1, 1, 4, 4}));
  // Pad 1, 5x5, k2 s2: ceil(5 / 2) + 1 = 4, but the last window would start at
  // 6 - 1 = 5 >= 5 + 1 - 1: dropped, 3 remain.
  EXPECT_EQ(this->TopShape("kernel_size: 2 stride: 2 pad: 1", {1, 1, 5, 5}), Shape({1, 1, 3, 3}));
  // Rectangular kernel, stride and pad.
  EXPECT_EQ(this->TopShape("pool: AVE kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 "
                           "pad_w: 0",
                           {1, 2, 7, 5}),
            Shape({1, 2, 4, 4}));
  EXPECT_EQ(this->TopShape("global_pooling: true", {2, 5, 7, 3}), Shape({2, 5, 1, 1}));
  // The mask top has the shape of the output.
  this->TopShape("kernel_size: 2 stride: 2", {1, 2, 4, 4}, 2);
  EXPECT_EQ(this->tops_[1]->shape(), Shape({1, 2, 2, 2}));
}

TYPED_TEST(PoolingLayerTest, ParameterErrors) {
  const Shape s = {1, 1, 6, 6};
  EXPECT_EQ(this->SetUpError("pool: STOCHASTIC kernel_size: 2", s),
            "pool: STOCHASTIC is not supported (only MAX and AVE)");
  EXPECT_EQ(this->SetUpError("stride: 2", s), "kernel_size must be given");
  EXPECT_EQ(this->SetUpError("kernel_h: 2", s), "kernel_h and kernel_w must be given together");
  EXPECT_EQ(this->SetUpError("kernel_size: 2 kernel_h: 2 kernel_w: 2", s),
            "give either kernel_size or kernel_h/kernel_w, not both");
  EXPECT_EQ(this->SetUpError("global_pooling: true kernel_size: 2", s),
            "kernel_size must not be given with global_pooling");
  EXPECT_EQ(this->SetUpError("global_pooling: true stride: 2", s),
            "global_pooling needs pad 0 and stride 1");
  EXPECT_EQ(this->SetUpError("kernel_size: 3 pad: 1 pad_h: 1 pad_w: 1", s),
            "give either pad or pad_h/pad_w, not both");
  EXPECT_EQ(this->SetUpError("kernel_size: 3 pad_h: 1", s),
            "pad_h and pad_w must be given together");
  EXPECT_EQ(this->SetUpError("kernel_size: 3 stride: 1 stride_h: 1 stride_w: 1", s),
            "give either stride or stride_h/stride_w, not both");
  EXPECT_EQ(this->SetUpError("kernel_size: 3 stride_w: 1", s),
            "stride_h and stride_w must be given together");
  EXPECT_EQ(this->SetUpError("kernel_size: 0", s), "kernel size must be positive, got 0x0");
  EXPECT_EQ(this->SetUpError("kernel_size: 2 stride: 0", s), "stride must be positive, got 0x0");
  EXPECT_EQ(this->SetUpError("kernel_size: 2 pad: 2", s),
            "pad 2x2 must be smaller than the kernel 2x2");
  EXPECT_EQ(this->SetUpError("kernel_size: 7", s),
            "kernel 7x7 is larger than the input 6x6 with pad 0x0");
  EXPECT_EQ(this->SetUpError("kernel_size: 2", {6, 6}),
            "Pooling needs a 4-D bottom (N, C, H, W), bottom 0 has 2 axes");
  EXPECT_EQ(this->SetUpError("pool: AVE kernel_size: 2", s, 2),
            "Pooling layer produces at most 1 top, got 2");
}

TYPED_TEST(PoolingLayerTest, MaxForwardAndMask) {
  // Caffe's own test case: 3x5 input, 2x2 kernel, stride 1.
  const Values input = {1, 2, 5, 2, 3, 9, 4, 1, 4, 8, 1, 2, 5, 2, 3};
  EXPECT_EQ(this->Forward("kernel_size: 2 stride: 1", {1, 1, 3, 5}, input),
            Values({9, 5, 5, 8, 9, 5, 5, 8}));
  EXPECT_EQ(this->Forward("kernel_size: 2 stride: 1", {1, 1, 3, 5}, input, 2),
            Values({9, 5, 5, 8, 9, 5, 5, 8}));
  EXPECT_EQ(Values(this->tops_[1]->cpu_data(), this->tops_[1]->cpu_data() + 8),
            Values({5, 2, 2, 9, 5, 12, 12, 9}));
}

TYPED_TEST(PoolingLayerTest, MaxForwardCeilAndPad) {
  // k3 s2 on 4x4: windows rows/cols {0..2}, {2..3} (clipped).
  EXPECT_EQ(this->Forward("kernel_size: 3 stride: 2", {1, 1, 4, 4}, Plane4x4()),
            Values({11, 12, 15, 16}));
  // Pad 1: windows {-1..1}, {1..3}, {3..5} clipped to {0,1}, {1..3}, {3}.
  EXPECT_EQ(this->Forward("kernel_size: 3 stride: 2 pad: 1", {1, 1, 4, 4}, Plane4x4(), 2),
            Values({6, 8, 8, 14, 16, 16, 14, 16, 16}));
  EXPECT_EQ(Values(this->tops_[1]->cpu_data(), this->tops_[1]->cpu_data() + 9),
            Values({5, 7, 7, 13, 15, 15, 13, 15, 15}));
}

TYPED_TEST(PoolingLayerTest, AveForwardCaffeDivisor) {
  // No pad: the last windows are clipped to the input and divided by their size.
  EXPECT_EQ(this->Forward("pool: AVE kernel_size: 3 stride: 2", {1, 1, 4, 4}, Plane4x4()),
            Values({6, 7.5, 12, 13.5}));
  // Pad 1, k3 s2: windows [-1,2), [1,4), [3,5) -> divisors 3, 3, 2 (clipped at
  // 4 + 1), sums over rows {0,1}, {1,2,3}, {3}.
  const Values padded =
      this->Forward("pool: AVE kernel_size: 3 stride: 2 pad: 1", {1, 1, 4, 4}, Plane4x4());
  const Values expected = {14.f / 9, 10.f / 3, 2, 19.f / 3, 11, 6, 9.f / 2, 15.f / 2, 4};
  ExpectBlobsNear(expected.data(), padded.data(), 9, 1e-6f, "AVE pad 1 stride 2");
  // Pad 1, k3 s1: every window lies inside [-1, 5): divisor 9 throughout.
  const Values inside =
      this->Forward("pool: AVE kernel_size: 3 stride: 1 pad: 1", {1, 1, 4, 4}, Plane4x4());
  const Values expected_inside = {14.f / 9, 8.f / 3, 10.f / 3, 22.f / 9, 11.f / 3, 6, 7,        5,
                                  19.f / 3, 10,      11,       23.f / 3, 46.f / 9, 8, 26.f / 3, 6};
  ExpectBlobsNear(expected_inside.data(), inside.data(), 16, 1e-6f, "AVE pad 1 stride 1");
}

TYPED_TEST(PoolingLayerTest, GlobalPooling) {
  const Values input = {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6};
  EXPECT_EQ(this->Forward("global_pooling: true", {1, 2, 2, 3}, input), Values({6, -1}));
  EXPECT_EQ(this->Forward("pool: AVE global_pooling: true", {1, 2, 2, 3}, input),
            Values({3.5, -3.5}));
}

TYPED_TEST(PoolingLayerTest, MaxBackwardRoutesToArgmax) {
  const Values input = {1, 2, 5, 2, 3, 9, 4, 1, 4, 8, 1, 2, 5, 2, 3};
  this->Forward("kernel_size: 2 stride: 1", {1, 1, 3, 5}, input);
  const Values dout = {1, 2, 3, 4, 5, 6, 7, 8};
  std::copy(dout.begin(), dout.end(), this->tops_[0]->mutable_cpu_diff());
  this->bottoms_[0]->SetDiffZero();
  this->bottoms_[0]->mutable_cpu_diff()[0] = 99.f;  // overwritten, not added to
  this->layer_->Backward(this->tops_.vec(), {true}, this->bottoms_.vec());
  // argmaxes: 5, 2, 2, 9 / 5, 12, 12, 9.
  const Values expected = {0, 0, 2 + 3, 0, 0, 1 + 5, 0, 0, 0, 4 + 8, 0, 0, 6 + 7, 0, 0};
  EXPECT_EQ(Values(this->bottoms_[0]->cpu_diff(), this->bottoms_[0]->cpu_diff() + 15), expected);
}

TYPED_TEST(PoolingLayerTest, GradientMax) {
  this->CheckGradientsOf("kernel_size: 3 stride: 2", {2, 3, 5, 5});
  this->CheckGradientsOf("kernel_size: 3 stride: 2 pad: 1", {2, 2, 6, 5});
  this->CheckGradientsOf("kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2", {1, 2, 5, 6});
}

TYPED_TEST(PoolingLayerTest, GradientMaxWithMaskTop) {
  this->CheckGradientsOf("kernel_size: 2 stride: 2 pad: 1", {2, 2, 5, 5}, 2);
}

TYPED_TEST(PoolingLayerTest, GradientAve) {
  this->CheckGradientsOf("pool: AVE kernel_size: 3 stride: 2", {2, 3, 5, 6});
  this->CheckGradientsOf("pool: AVE kernel_size: 3 stride: 2 pad: 1", {2, 2, 6, 6});
  this->CheckGradientsOf("pool: AVE kernel_size: 3 stride: 1 pad: 1", {1, 2, 4, 5});
  this->CheckGradientsOf("pool: AVE global_pooling: true", {2, 3, 3, 4});
}

TYPED_TEST(PoolingLayerTest, ForwardAfterShapeChange) {
  this->Forward("pool: AVE kernel_size: 2 stride: 2", {1, 1, 4, 4}, Plane4x4());
  this->bottoms_[0]->Reshape({2, 1, 2, 2});
  ASSERT_TRUE(this->layer_->Reshape(this->bottoms_.vec(), this->tops_.vec()).ok());
  const Values input = {1, 2, 3, 4, 10, 20, 30, 40};
  std::copy(input.begin(), input.end(), this->bottoms_[0]->mutable_cpu_data());
  this->layer_->Forward(this->bottoms_.vec(), this->tops_.vec());
  ASSERT_EQ(this->tops_[0]->shape(), Shape({2, 1, 1, 1}));
  EXPECT_EQ(Values(this->tops_[0]->cpu_data(), this->tops_[0]->cpu_data() + 2), Values({2.5, 25}));
}

// --- the fast path against the reference on realistic shapes -----------------

void FillUniform(const BlobVec& bottoms) { BlobSet::FillUniform(bottoms[0], 17, -1.f, 1.f); }

// The default fast implementation ("vector") against the reference, then
// "onednn" where `dnnl` says oneDNN can run the configuration (it is offered
// exactly then).
void ExpectAgree(const std::string& param, const Shape& shape, bool dnnl = true) {
  SCOPED_TRACE(param);
  ExpectEnginesAgree(Pool(param), {shape}, FillUniform, 1e-5f);
  BlobSet bottoms;
  BlobSet tops;
  BlobSet ref_tops;
  bottoms.Add(shape);
  tops.Add({});
  ref_tops.Add({});
  auto layer = MakeLayer(Pool(param), Engine::kFast);
  auto ref = MakeLayer(Pool(param), Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
  ASSERT_TRUE(ref->SetUp(bottoms.vec(), ref_tops.vec()).ok());
  EXPECT_EQ(layer->CpuImplementation(), "vector");
  const std::vector<std::string> names = layer->CpuImplementations();
  EXPECT_EQ(std::find(names.begin(), names.end(), "onednn") != names.end(), dnnl);
  if (!dnnl) return;
  ASSERT_TRUE(layer->SelectCpuImplementation("onednn").ok());
  FillUniform(bottoms.vec());
  layer->Forward(bottoms.vec(), tops.vec());
  EXPECT_TRUE(static_cast<PoolingLayer*>(layer.get())->UsesDnnl());
  ref->Forward(bottoms.vec(), ref_tops.vec());
  ExpectBlobsNear(tops[0]->cpu_data(), ref_tops[0]->cpu_data(), tops[0]->count(), 1e-5f, "top");
  BlobSet::FillUniform(tops[0], 23, -1.f, 1.f);
  std::copy(tops[0]->cpu_data(), tops[0]->cpu_data() + tops[0]->count(),
            tops[0]->mutable_cpu_diff());
  std::copy(tops[0]->cpu_diff(), tops[0]->cpu_diff() + tops[0]->count(),
            ref_tops[0]->mutable_cpu_diff());
  layer->Forward(bottoms.vec(), tops.vec());  // the workspace for this bottom
  layer->Backward(tops.vec(), {true}, bottoms.vec());
  const std::vector<float> dnnl_diff(bottoms[0]->cpu_diff(),
                                     bottoms[0]->cpu_diff() + bottoms[0]->count());
  ref->Backward(ref_tops.vec(), {true}, bottoms.vec());
  ExpectBlobsNear(dnnl_diff.data(), bottoms[0]->cpu_diff(), bottoms[0]->count(), 1e-5f,
                  "bottom diff");
}

TEST(PoolingEnginesTest, LeNetAndCifarShapes) {
  ExpectAgree("kernel_size: 2 stride: 2", {8, 20, 24, 24});
  ExpectAgree("kernel_size: 2 stride: 2", {8, 50, 8, 8});
  ExpectAgree("kernel_size: 3 stride: 2", {4, 32, 32, 32});
  ExpectAgree("pool: AVE kernel_size: 3 stride: 2", {4, 32, 16, 16});
  ExpectAgree("pool: AVE kernel_size: 3 stride: 2", {4, 64, 8, 8});
}

TEST(PoolingEnginesTest, PaddingRoundingAndGlobal) {
  ExpectAgree("kernel_size: 3 stride: 2 pad: 1", {2, 8, 13, 12});
  ExpectAgree("kernel_size: 2 stride: 2 pad: 1", {2, 8, 5, 5});
  ExpectAgree("kernel_size: 3 stride: 2 round_mode: FLOOR", {2, 8, 12, 12});
  ExpectAgree("pool: AVE kernel_size: 3 stride: 1 pad: 1", {2, 8, 9, 7});
  ExpectAgree("pool: AVE kernel_size: 3 stride: 2 pad: 1 round_mode: FLOOR", {2, 8, 12, 12});
  ExpectAgree("pool: AVE kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0",
              {2, 4, 7, 5});
  ExpectAgree("pool: AVE global_pooling: true", {2, 16, 7, 7});
  ExpectAgree("global_pooling: true", {2, 16, 7, 7});
  // AVE with pad whose last window runs past in + pad: oneDNN cannot divide
  // as Caffe does, so it is not offered.
  ExpectAgree("pool: AVE kernel_size: 3 stride: 2 pad: 1", {2, 8, 12, 12}, false);
}

}  // namespace
}  // namespace pstrain::testing

// Caffe's utility layers ArgMax, BatchReindex, MVN, Im2col and SPP. Forward
// and backward against hand-computed values, finite-difference gradients on
// the CPU engines and on the GPU (skipped without a device), bad parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/net.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::CheckGradients;
using testing::Data;
using testing::Diff;
using testing::MakeLayer;
using testing::Set;

// Runs `proto` forward on bottoms of `shapes` holding `values`; returns the top.
struct Forwarded {
  std::vector<int> shape;
  std::vector<float> y;
};
Forwarded Forward(const std::string& proto, const std::vector<std::vector<int>>& shapes,
                  const std::vector<std::vector<float>>& values) {
  BlobSet bottom, top;
  for (size_t i = 0; i < shapes.size(); ++i) Set(bottom.Add({}), shapes[i], values[i]);
  top.Add({});
  auto layer = MakeLayer(proto, Engine::kReference);
  const Status s = layer->SetUp(bottom.vec(), top.vec());
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return {};
  layer->Forward(bottom.vec(), top.vec());
  return {top[0]->shape(), Data(*top[0])};
}

std::string SetUpError(const std::string& proto, const std::vector<std::vector<int>>& shapes) {
  BlobSet bottom, top;
  for (const auto& s : shapes) bottom.Add(s);
  top.Add({});
  return MakeLayer(proto, Engine::kReference)->SetUp(bottom.vec(), top.vec()).message();
}

// ---- ArgMax ----

TEST(UtilityLayersMoreTest, ArgMaxByHand) {
  const std::vector<float> x = {3, 1, 3, 2, 0, 5, -1, 5};  // 2 x 4, with ties
  struct Case {
    std::string param;
    std::vector<int> shape;
    std::vector<float> y;
  };
  // Ties rank the larger index first (Caffe's std::greater on (value, index)).
  const std::vector<Case> cases = {
      {"", {2, 1, 1}, {2, 3}},
      {"top_k: 2", {2, 1, 2}, {2, 0, 3, 1}},
      {"top_k: 2 out_max_val: true", {2, 2, 2}, {2, 0, 3, 3, 3, 1, 5, 5}},
      {"axis: 0", {1, 4}, {0, 1, 0, 1}},
      {"axis: 0 out_max_val: true", {1, 4}, {3, 5, 3, 5}},
      {"axis: -1 top_k: 3", {2, 3}, {2, 0, 3, 3, 1, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.param);
    const Forwarded f = Forward("type: 'ArgMax' argmax_param { " + c.param + " }", {{2, 4}}, {x});
    EXPECT_EQ(f.shape, c.shape);
    EXPECT_EQ(f.y, c.y);
  }
  // A middle axis: x[n][c][w], ranked over c for each (n, w).
  const Forwarded mid = Forward("type: 'ArgMax' argmax_param { axis: 1 }", {{2, 3, 2}},
                                {{5, 0, 1, 7, 2, 2, 0, 1, 3, 1, 3, 0}});
  EXPECT_EQ(mid.shape, (std::vector<int>{2, 1, 2}));
  EXPECT_EQ(mid.y, (std::vector<float>{0, 1, 2, 1}));
}

TEST(UtilityLayersMoreTest, ArgMaxBadParameters) {
  EXPECT_EQ(SetUpError("type: 'ArgMax' argmax_param { top_k: 0 }", {{2, 3}}),
            "argmax_param.top_k must be at least 1, got 0");
  EXPECT_EQ(SetUpError("type: 'ArgMax' argmax_param { axis: 2 }", {{2, 3}}),
            "argmax_param.axis 2 is out of range for bottom 0 of shape 2 3 (6)");
  EXPECT_EQ(SetUpError("type: 'ArgMax' argmax_param { top_k: 4 }", {{2, 3}}),
            "argmax_param.top_k 4 exceeds the 3 values each instance of bottom 0 (shape 2 3 (6)) "
            "has");
  EXPECT_EQ(SetUpError("type: 'ArgMax' argmax_param { axis: 0 top_k: 3 }", {{2, 3}}),
            "argmax_param.top_k 3 exceeds the 2 values each instance of bottom 0 (shape 2 3 (6)) "
            "has");
}

// ---- BatchReindex ----

TEST(UtilityLayersMoreTest, BatchReindexByHand) {
  BlobSet bottom, top;
  Set(bottom.Add({}), {3, 2}, {1, 2, 3, 4, 5, 6});
  Set(bottom.Add({}), {4}, {2, 0, 2, 1});
  top.Add({});
  auto layer = MakeLayer("type: 'BatchReindex'", Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{4, 2}));
  layer->Forward(bottom.vec(), top.vec());
  EXPECT_EQ(Data(*top[0]), (std::vector<float>{5, 6, 1, 2, 5, 6, 3, 4}));
  for (int i = 0; i < 8; ++i) top[0]->mutable_cpu_diff()[i] = static_cast<float>(i);
  layer->Backward(top.vec(), {true, false}, bottom.vec());
  // Sample 2 was picked twice: its diff sums top rows 0 and 2.
  EXPECT_EQ(Diff(*bottom[0]), (std::vector<float>{2, 3, 6, 7, 0 + 4, 1 + 5}));
  EXPECT_FALSE(layer->AllowForceBackward(1));
  EXPECT_TRUE(layer->RuntimeStatus().ok());
}

TEST(UtilityLayersMoreTest, BatchReindexIndexOutOfRangeIsARunTimeError) {
  const std::string net_text = R"(
    layer { name: "in" type: "Input" top: "x" top: "i"
            input_param { shape { dim: 3 dim: 2 } shape { dim: 2 } } }
    layer { name: "pick" type: "BatchReindex" bottom: "x" bottom: "i" top: "y" })";
  auto net = testing::BuildNet(net_text);
  ASSERT_TRUE(net);
  Set(net->blob_by_name("x"), {3, 2}, {1, 2, 3, 4, 5, 6});
  Set(net->blob_by_name("i"), {2}, {0, 3});
  net->Forward();
  const Status status = net->RuntimeStatus();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("pick"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(
                "index 3 at position 1 of bottom 1 is outside [0, 3), the samples of bottom 0"),
            std::string::npos)
      << status.message();
  EXPECT_EQ(Data(*net->blob_by_name("y")), (std::vector<float>{1, 2, 0, 0}));
  Set(net->blob_by_name("i"), {2}, {-1, 0});
  net->Forward();
  EXPECT_NE(net->RuntimeStatus().message().find("index -1 at position 0"), std::string::npos);
  Set(net->blob_by_name("i"), {2}, {2, 2});
  net->Forward();
  EXPECT_TRUE(net->RuntimeStatus().ok());
  EXPECT_EQ(Data(*net->blob_by_name("y")), (std::vector<float>{5, 6, 5, 6}));
}

TEST(UtilityLayersMoreTest, BatchReindexBadShapes) {
  EXPECT_EQ(SetUpError("type: 'BatchReindex'", {{3, 2}, {2, 1}}),
            "bottom 1 (the indices) must have exactly one axis, got shape 2 1 (2)");
  EXPECT_EQ(SetUpError("type: 'BatchReindex'", {{}, {2}}),
            "bottom 0 must have an axis 0 to reindex, got shape (1)");
}

// Bottom 0 gaussian, bottom 1 the indices 3, 0, 3, 1, 0 into N = 4 samples.
void FillReindex(const BlobVec& b) {
  BlobSet::FillGaussian(b[0], 50);
  const std::vector<float> index = {3, 0, 3, 1, 0};
  std::copy(index.begin(), index.end(), b[1]->mutable_cpu_data());
}

// ---- MVN ----

TEST(UtilityLayersMoreTest, MVNForwardByHand) {
  const std::vector<float> x = {1, 3, 0, 4};  // 1 x 2 x 2: channels {1, 3} and {0, 4}
  const float r = std::sqrt(2.5f);            // the root of {1, 3, 0, 4}'s variance
  struct Case {
    std::string param;
    std::vector<float> y;
  };
  const std::vector<Case> cases = {
      {"", {-1, 1, -1, 1}},  // per channel: s = 1 and 2
      {"eps: 0.5", {-1 / 1.5f, 1 / 1.5f, -2 / 2.5f, 2 / 2.5f}},
      {"across_channels: true", {-1 / r, 1 / r, -2 / r, 2 / r}},
      {"normalize_variance: false", {-1, 1, -2, 2}},
      {"normalize_variance: false across_channels: true", {-1, 1, -2, 2}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.param);
    const Forwarded f = Forward("type: 'MVN' mvn_param { " + c.param + " }", {{1, 2, 2}}, {x});
    EXPECT_EQ(f.shape, (std::vector<int>{1, 2, 2, 1}));  // Caffe's legacy 4-D top
    ASSERT_EQ(f.y.size(), c.y.size());
    for (size_t i = 0; i < c.y.size(); ++i) EXPECT_NEAR(f.y[i], c.y[i], 1e-6f) << i;
  }
}

TEST(UtilityLayersMoreTest, MVNBackwardByHand) {
  struct Case {
    std::string param;
    std::vector<float> dx;
  };
  const float r = std::sqrt(2.5f);
  // dy = (1, 0, 0, 0). Across channels: y = (-1, 1, -2, 2) / r, mean(dy) = 1/4,
  // mean(dy y) = -1 / (4 r): dx = (dy - 1/4 - y mean(dy y)) / r.
  const std::vector<Case> cases = {
      {"across_channels: true", {0.65f / r, -0.15f / r, -0.45f / r, -0.05f / r}},
      {"normalize_variance: false", {0.5f, -0.5f, 0, 0}},
      {"normalize_variance: false across_channels: true", {0.75f, -0.25f, -0.25f, -0.25f}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.param);
    BlobSet bottom, top;
    Set(bottom.Add({}), {1, 2, 2}, {1, 3, 0, 4});
    top.Add({});
    auto layer = MakeLayer("type: 'MVN' mvn_param { " + c.param + " }", Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    layer->Forward(bottom.vec(), top.vec());
    std::fill(top[0]->mutable_cpu_diff(), top[0]->mutable_cpu_diff() + 4, 0.f);
    top[0]->mutable_cpu_diff()[0] = 1;
    layer->Backward(top.vec(), {true}, bottom.vec());
    for (size_t i = 0; i < c.dx.size(); ++i) EXPECT_NEAR(bottom[0]->cpu_diff()[i], c.dx[i], 1e-6f);
  }
}

TEST(UtilityLayersMoreTest, MVNBadParameters) {
  EXPECT_EQ(SetUpError("type: 'MVN' mvn_param { eps: -1 }", {{2, 3}}),
            "mvn_param.eps must be non-negative, got -1");
  EXPECT_EQ(SetUpError("type: 'MVN'", {{1, 1, 1, 1, 2}}),
            "MVN takes a bottom of at most 4 axes (num, channels, height, width), got shape 1 1 1 "
            "1 2 (2)");
}

// ---- Im2col ----

TEST(UtilityLayersMoreTest, Im2colForwardByHand) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // 1 x 1 x 3 x 3
  struct Case {
    std::string param;
    std::vector<int> shape;
    std::vector<float> y;
  };
  // Top channel i kw + j: the input at kernel offset (i, j) of each window.
  const std::vector<Case> cases = {
      {"kernel_size: 2", {1, 4, 2, 2}, {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9}},
      {"kernel_size: 2 pad: 1 stride: 2",
       {1, 4, 2, 2},
       {0, 0, 0, 5, 0, 0, 4, 6, 0, 2, 0, 8, 1, 3, 7, 9}},
      {"kernel_size: 2 dilation: 2", {1, 4, 1, 1}, {1, 3, 7, 9}},
      {"kernel_h: 1 kernel_w: 3 stride_h: 2 stride_w: 1", {1, 3, 2, 1}, {1, 7, 2, 8, 3, 9}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.param);
    const Forwarded f =
        Forward("type: 'Im2col' convolution_param { " + c.param + " }", {{1, 1, 3, 3}}, {x});
    EXPECT_EQ(f.shape, c.shape);
    EXPECT_EQ(f.y, c.y);
  }
  // Channels outermost: channel c's kh kw rows, then channel c + 1's.
  const Forwarded two = Forward("type: 'Im2col' convolution_param { kernel_size: 2 num_output: 7 }",
                                {{1, 2, 2, 2}}, {{1, 2, 3, 4, 5, 6, 7, 8}});
  EXPECT_EQ(two.shape, (std::vector<int>{1, 8, 1, 1}));
  EXPECT_EQ(two.y, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(UtilityLayersMoreTest, Im2colBackwardAddsBack) {
  for (Engine engine : {Engine::kReference, Engine::kFast}) {
    BlobSet bottom, top;
    Set(bottom.Add({}), {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    top.Add({});
    auto layer = MakeLayer("type: 'Im2col' convolution_param { kernel_size: 2 }", engine);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    EXPECT_TRUE(layer->blobs().empty());  // nothing learnable
    layer->Forward(bottom.vec(), top.vec());
    std::fill(top[0]->mutable_cpu_diff(), top[0]->mutable_cpu_diff() + top[0]->count(), 1.f);
    layer->Backward(top.vec(), {true}, bottom.vec());
    // Each pixel gets one per window that holds it.
    EXPECT_EQ(Diff(*bottom[0]), (std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
  }
}

TEST(UtilityLayersMoreTest, Im2colBadParameters) {
  EXPECT_EQ(SetUpError("type: 'Im2col'", {{1, 1, 3, 3}}), "kernel_size must be given");
  EXPECT_EQ(SetUpError("type: 'Im2col' convolution_param { kernel_size: 2 }", {{1, 3, 3}}),
            "bottom 0 has 3 axes; only 2-D im2col (N, C, H, W) is supported");
  EXPECT_EQ(
      SetUpError("type: 'Im2col' convolution_param { kernel_size: 2 axis: 2 }", {{1, 1, 3, 3}}),
      "Im2col supports only axis 1 (channels), got axis 2");
  EXPECT_EQ(
      SetUpError("type: 'Im2col' convolution_param { kernel_size: 2 stride: 0 }", {{1, 1, 3, 3}}),
      "stride must be positive, got 0x0");
}

// ---- SPP ----

std::vector<float> Iota(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

TEST(UtilityLayersMoreTest, SPPForwardByHand) {
  struct Case {
    std::string param;
    int side;
    std::vector<int> shape;
    std::vector<float> y;
  };
  // x = 1 .. side^2 in one plane. Level 0: the whole plane; level 1: 2 x 2 bins.
  const std::vector<Case> cases = {
      {"pyramid_height: 2", 4, {1, 5}, {16, 6, 8, 14, 16}},
      {"pyramid_height: 2 pool: AVE", 4, {1, 5}, {8.5f, 3.5f, 5.5f, 11.5f, 13.5f}},
      {"pyramid_height: 1", 4, {1, 1, 1, 1}, {16}},
      // 3 x 3, level 1: kernel 2, pad 1: bins of rows {0}, {1, 2} and columns alike.
      {"pyramid_height: 2", 3, {1, 5}, {9, 1, 3, 7, 9}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.param);
    const Forwarded f = Forward("type: 'SPP' spp_param { " + c.param + " }",
                                {{1, 1, c.side, c.side}}, {Iota(c.side * c.side)});
    EXPECT_EQ(f.shape, c.shape);
    EXPECT_EQ(f.y, c.y);
  }
  // Two channels: each level's bins channel by channel, levels one after the other.
  std::vector<float> x = Iota(8);
  const Forwarded two = Forward("type: 'SPP' spp_param { pyramid_height: 2 }", {{1, 2, 2, 2}}, {x});
  EXPECT_EQ(two.shape, (std::vector<int>{1, 10}));
  EXPECT_EQ(two.y, (std::vector<float>{4, 8, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(UtilityLayersMoreTest, SPPBackwardAndReshape) {
  for (Engine engine : {Engine::kReference, Engine::kFast}) {
    BlobSet bottom, top;
    Set(bottom.Add({}), {1, 1, 4, 4}, Iota(16));
    top.Add({});
    auto layer = MakeLayer("type: 'SPP' spp_param { pyramid_height: 2 }", engine);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    layer->Forward(bottom.vec(), top.vec());
    std::fill(top[0]->mutable_cpu_diff(), top[0]->mutable_cpu_diff() + 5, 1.f);
    layer->Backward(top.vec(), {true}, bottom.vec());
    std::vector<float> dx(16, 0.f);
    dx[15] = 2;  // 16 is the max of level 0 and of its level-1 bin
    dx[5] = dx[7] = dx[13] = 1;
    EXPECT_EQ(Diff(*bottom[0]), dx);
    // A new plane size rebuilds the levels.
    Set(bottom[0], {1, 1, 3, 3}, Iota(9));
    ASSERT_TRUE(layer->Reshape(bottom.vec(), top.vec()).ok());
    layer->Forward(bottom.vec(), top.vec());
    EXPECT_EQ(Data(*top[0]), (std::vector<float>{9, 1, 3, 7, 9}));
  }
}

TEST(UtilityLayersMoreTest, SPPBadParameters) {
  EXPECT_EQ(SetUpError("type: 'SPP'", {{1, 1, 4, 4}}),
            "spp_param.pyramid_height must be set and in [1, 30], got none");
  EXPECT_EQ(SetUpError("type: 'SPP' spp_param { pyramid_height: 0 }", {{1, 1, 4, 4}}),
            "spp_param.pyramid_height must be set and in [1, 30], got 0");
  EXPECT_EQ(SetUpError("type: 'SPP' spp_param { pyramid_height: 2 }", {{1, 3, 3}}),
            "SPP needs a 4-D bottom (N, C, H, W) with H and W at least 1, got shape 1 3 3 (9)");
  EXPECT_EQ(
      SetUpError("type: 'SPP' spp_param { pyramid_height: 2 pool: STOCHASTIC }", {{1, 1, 4, 4}}),
      "spp_param.pool: STOCHASTIC is not supported (only MAX and AVE)");
  // Level 2 of a 5 x 5 plane: kernel 2, pad 2; the inner Pooling's own message.
  EXPECT_EQ(SetUpError("type: 'SPP' spp_param { pyramid_height: 3 }", {{1, 1, 5, 5}}),
            "level 2 pooling: pad 2x2 must be smaller than the kernel 2x2");
}

// Gaussian values nudged off 0 (kinks).
void Fill(const BlobVec& b) {
  for (size_t i = 0; i < b.size(); ++i) {
    BlobSet::FillGaussian(b[i], 60 + i);
    float* d = b[i]->mutable_cpu_data();
    for (int64_t j = 0; j < b[i]->count(); ++j) {
      if (std::fabs(d[j]) < 0.05f) d[j] = d[j] < 0 ? -0.05f : 0.05f;
    }
  }
}

TEST(UtilityLayersMoreTest, ArgMaxOnGpu) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  for (const char* param : {"top_k: 3", "top_k: 2 out_max_val: true", "axis: 1 top_k: 2",
                            "axis: -1 out_max_val: true top_k: 4"}) {
    SCOPED_TRACE(param);
    const std::string proto = std::string("type: 'ArgMax' argmax_param { ") + param + " }";
    auto layer = MakeLayer(proto, Engine::kGpu);
    EXPECT_TRUE(layer->HasGpuPath());
    testing::ExpectEnginesAgree(proto, {{3, 5, 4}}, Fill, 0.f, 1, Engine::kGpu);
  }
}

// Distinct values 0.05 apart in a scrambled order (MAX pooling: no window
// holds two values within the finite-difference step of each other).
void FillDistinct(const BlobVec& b) {
  const int64_t n = b[0]->count();  // REQUIRES: n is coprime with 37
  float* d = b[0]->mutable_cpu_data();
  for (int64_t j = 0; j < n; ++j) d[j] = static_cast<float>((j * 37) % n) * 0.05f - 3.f;
}

// ---- Gradients of every layer with one ----

struct GradientCase {
  std::string proto;
  std::vector<std::vector<int>> shapes;
  void (*fill)(const BlobVec&) = Fill;
  std::vector<int> bottoms = {0};  // those with a gradient
};

std::vector<GradientCase> GradientCases() {
  return {
      {"type: 'BatchReindex'", {{4, 2, 3}, {5}}, FillReindex},
      {"type: 'MVN'", {{2, 3, 2, 3}}},
      {"type: 'MVN' mvn_param { across_channels: true }", {{2, 3, 4}}},
      {"type: 'MVN' mvn_param { normalize_variance: false }", {{2, 3, 4}}},
      {"type: 'MVN' mvn_param { normalize_variance: false across_channels: true }", {{3, 5}}},
      {"type: 'Im2col' convolution_param { kernel_size: 3 pad: 1 stride: 2 }", {{2, 3, 5, 5}}},
      {"type: 'Im2col' convolution_param { kernel_h: 2 kernel_w: 3 dilation: 2 }", {{1, 2, 6, 6}}},
      {"type: 'SPP' spp_param { pyramid_height: 3 }", {{2, 2, 8, 8}}, FillDistinct},
      {"type: 'SPP' spp_param { pyramid_height: 2 pool: AVE }", {{2, 3, 6, 7}}},
      {"type: 'SPP' spp_param { pyramid_height: 1 pool: AVE }", {{1, 2, 3, 5}}},
  };
}

void CheckCase(const GradientCase& c, Engine engine) {
  BlobSet bottom, top;
  for (const auto& s : c.shapes) bottom.Add(s);
  top.Add({});
  c.fill(bottom.vec());
  auto layer = MakeLayer(c.proto, engine);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  if (engine == Engine::kGpu) {
    ASSERT_TRUE(layer->HasGpuPath());
    EXPECT_EQ(layer->Implementation(), "gpu");
  }
  testing::GradientCheckOptions options;
  options.bottoms = c.bottoms;
  CheckGradients(*layer, bottom.vec(), top.vec(), options);
}

TEST(UtilityLayersMoreTest, GradientsOnCpuEngines) {
  for (const GradientCase& c : GradientCases()) {
    for (Engine engine : {Engine::kReference, Engine::kFast}) {
      SCOPED_TRACE(c.proto);
      CheckCase(c, engine);
    }
  }
}

TEST(UtilityLayersMoreTest, GradientsOnGpu) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  for (const GradientCase& c : GradientCases()) {
    SCOPED_TRACE(c.proto);
    CheckCase(c, Engine::kGpu);
    testing::ExpectEnginesAgree(c.proto, c.shapes, c.fill, 1e-4f, 1, Engine::kGpu);
  }
}

}  // namespace
}  // namespace pstrain

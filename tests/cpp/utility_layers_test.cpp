// Caffe's utility layers: Silence, Parameter, Reduction, Tile. Forward and
// backward against hand-computed values, finite-difference gradients on the
// CPU engines and on the GPU (skipped without a device), bad parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::CheckGradients;
using testing::Data;
using testing::Diff;
using testing::MakeLayer;
using testing::Set;

TEST(UtilityLayersTest, SilenceZeroesGradients) {
  BlobSet bottom;
  Set(bottom.Add({}), {2}, {1, 2});
  Set(bottom.Add({}), {3}, {1, 2, 3});
  bottom[0]->mutable_cpu_diff()[0] = 5;
  bottom[1]->mutable_cpu_diff()[0] = 5;
  auto layer = MakeLayer("type: 'Silence'", Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), {}).ok());
  layer->Forward(bottom.vec(), {});
  layer->Backward({}, {true, false}, bottom.vec());
  EXPECT_EQ(Diff(*bottom[0]), (std::vector<float>{0, 0}));
  EXPECT_EQ(bottom[1]->cpu_diff()[0], 5.f);
}

TEST(UtilityLayersTest, ParameterIsItsTop) {
  BlobSet top;
  top.Add({});
  auto layer = MakeLayer("type: 'Parameter' parameter_param { shape { dim: 2 dim: 3 } }",
                         Engine::kReference);
  ASSERT_TRUE(layer->SetUp({}, top.vec()).ok());
  ASSERT_EQ(layer->blobs().size(), 1u);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 3}));
  layer->blobs()[0]->mutable_cpu_data()[4] = 7;
  layer->Forward({}, top.vec());
  EXPECT_EQ(top[0]->cpu_data()[4], 7.f);
  top[0]->mutable_cpu_diff()[1] = 3;
  layer->Backward(top.vec(), {}, {});
  EXPECT_EQ(layer->blobs()[0]->cpu_diff()[1], 3.f);
  EXPECT_EQ(MakeLayer("type: 'Parameter'", Engine::kReference)->SetUp({}, top.vec()).message(),
            "Parameter needs parameter_param { shape { dim: ... } }");
}

TEST(UtilityLayersTest, ReductionByHand) {
  struct Case {
    std::string param;
    std::vector<int> shape;
    std::vector<float> y, dx;
  };
  // x = (1, -2, 3 | -4, 5, 6) as 2 x 3; dy = 1 per top value (2 for axis 0).
  const std::vector<Case> cases = {
      {"", {}, {9}, {2, 2, 2, 2, 2, 2}},
      {"axis: 1", {2}, {2, 7}, {1, 1, 1, 1, 1, 1}},
      {"axis: -1 operation: ASUM", {2}, {6, 15}, {1, -1, 1, -1, 1, 1}},
      {"axis: 1 operation: SUMSQ coeff: 0.5", {2}, {7, 38.5f}, {1, -2, 3, -4, 5, 6}},
      {"axis: 1 operation: MEAN coeff: 3", {2}, {2, 7}, {1, 1, 1, 1, 1, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.param);
    BlobSet bottom, top;
    Set(bottom.Add({}), {2, 3}, {1, -2, 3, -4, 5, 6});
    top.Add({});
    auto layer =
        MakeLayer("type: 'Reduction' reduction_param { " + c.param + " }", Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    EXPECT_EQ(top[0]->shape(), c.shape);
    layer->Forward(bottom.vec(), top.vec());
    for (size_t i = 0; i < c.y.size(); ++i) EXPECT_FLOAT_EQ(top[0]->cpu_data()[i], c.y[i]);
    for (int64_t i = 0; i < top[0]->count(); ++i) {
      top[0]->mutable_cpu_diff()[i] = top[0]->count() == 1 ? 2.f : 1.f;
    }
    layer->Backward(top.vec(), {true}, bottom.vec());
    for (size_t i = 0; i < c.dx.size(); ++i) EXPECT_FLOAT_EQ(bottom[0]->cpu_diff()[i], c.dx[i]);
  }
}

TEST(UtilityLayersTest, TileByHand) {
  BlobSet bottom, top;
  Set(bottom.Add({}), {2, 2}, {1, 2, 3, 4});
  top.Add({});
  auto layer = MakeLayer("type: 'Tile' tile_param { tiles: 3 }", Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 6}));
  layer->Forward(bottom.vec(), top.vec());
  EXPECT_EQ(Data(*top[0]), (std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  for (int i = 0; i < 12; ++i) top[0]->mutable_cpu_diff()[i] = static_cast<float>(i);
  layer->Backward(top.vec(), {true}, bottom.vec());
  EXPECT_EQ(Diff(*bottom[0]), (std::vector<float>{0 + 2 + 4, 1 + 3 + 5, 6 + 8 + 10, 7 + 9 + 11}));
  auto axis0 = MakeLayer("type: 'Tile' tile_param { axis: 0 tiles: 2 }", Engine::kReference);
  ASSERT_TRUE(axis0->SetUp(bottom.vec(), top.vec()).ok());
  axis0->Forward(bottom.vec(), top.vec());
  EXPECT_EQ(Data(*top[0]), (std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4}));
}

std::string SetUpError(const std::string& proto, const std::vector<int>& shape = {2, 3}) {
  BlobSet bottom, top;
  bottom.Add(shape);
  top.Add({});
  return MakeLayer(proto, Engine::kReference)->SetUp(bottom.vec(), top.vec()).message();
}

TEST(UtilityLayersTest, BadParameters) {
  EXPECT_EQ(SetUpError("type: 'Tile'"), "tile_param.tiles must be set and positive, got none");
  EXPECT_EQ(SetUpError("type: 'Tile' tile_param { tiles: 0 }"),
            "tile_param.tiles must be set and positive, got 0");
  EXPECT_EQ(SetUpError("type: 'Tile' tile_param { tiles: 2 axis: 2 }"),
            "tile_param.axis 2 is out of range for bottom 0 of shape 2 3 (6)");
  EXPECT_EQ(SetUpError("type: 'Reduction' reduction_param { axis: -3 }"),
            "reduction_param.axis -3 is out of range for bottom 0 of shape 2 3 (6)");
}

struct GradientCase {
  std::string proto;
  std::vector<std::vector<int>> shapes;
};

std::vector<GradientCase> GradientCases() {
  return {
      {"type: 'Reduction' reduction_param { axis: 1 operation: SUM coeff: 2 }", {{2, 3, 4}}},
      {"type: 'Reduction' reduction_param { axis: 0 operation: ASUM }", {{2, 3}}},
      {"type: 'Reduction' reduction_param { axis: 2 operation: SUMSQ }", {{2, 3, 4}}},
      {"type: 'Reduction' reduction_param { axis: -1 operation: MEAN coeff: -1 }", {{2, 3, 4}}},
      {"type: 'Tile' tile_param { axis: 1 tiles: 3 }", {{2, 3, 2}}},
      {"type: 'Tile' tile_param { axis: -1 tiles: 2 }", {{2, 3, 2}}},
  };
}

// Gaussian values nudged off 0 (ASUM's kink).
void Fill(const BlobVec& b) {
  for (size_t i = 0; i < b.size(); ++i) {
    BlobSet::FillGaussian(b[i], 40 + i);
    float* d = b[i]->mutable_cpu_data();
    for (int64_t j = 0; j < b[i]->count(); ++j) {
      if (std::fabs(d[j]) < 0.05f) d[j] = d[j] < 0 ? -0.05f : 0.05f;
    }
  }
}

TEST(UtilityLayersTest, GradientsOnCpuEngines) {
  for (const GradientCase& c : GradientCases()) {
    for (Engine engine : {Engine::kReference, Engine::kFast}) {
      SCOPED_TRACE(c.proto);
      BlobSet bottom, top;
      for (const auto& s : c.shapes) bottom.Add(s);
      top.Add({});
      Fill(bottom.vec());
      auto layer = MakeLayer(c.proto, engine);
      ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
      CheckGradients(*layer, bottom.vec(), top.vec());
    }
  }
}

TEST(UtilityLayersTest, GradientsOnGpu) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  for (const GradientCase& c : GradientCases()) {
    SCOPED_TRACE(c.proto);
    BlobSet bottom, top;
    for (const auto& s : c.shapes) bottom.Add(s);
    top.Add({});
    Fill(bottom.vec());
    auto layer = MakeLayer(c.proto, Engine::kGpu);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    ASSERT_TRUE(layer->HasGpuPath());
    EXPECT_EQ(layer->Implementation(), "gpu");
    CheckGradients(*layer, bottom.vec(), top.vec());
    testing::ExpectEnginesAgree(c.proto, c.shapes, Fill, 1e-4f, 1, Engine::kGpu);
  }
  for (const char* type : {"Silence", "Parameter"}) {
    EXPECT_TRUE(MakeLayer(std::string("type: '") + type + "'", Engine::kGpu)->HasGpuPath());
  }
}

}  // namespace
}  // namespace pstrain

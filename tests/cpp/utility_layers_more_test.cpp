// Caffe's utility layers ArgMax, BatchReindex, MVN, Im2col and SPP. Forward
// and backward against hand-computed values, finite-difference gradients on
// the CPU engines and on the GPU (skipped without a device), bad parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::CheckGradients;
using testing::MakeLayer;

void Set(Blob* blob, const std::vector<int>& shape, const std::vector<float>& values) {
  blob->Reshape(shape);
  std::copy(values.begin(), values.end(), blob->mutable_cpu_data());
}

std::vector<float> Data(const Blob& b) { return {b.cpu_data(), b.cpu_data() + b.count()}; }

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

}  // namespace
}  // namespace pstrain

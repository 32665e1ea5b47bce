// Caffe's Filter layer: the samples whose selector is non-zero, by hand
// (forward, backward, an empty selection), finite differences, bad shapes,
// and through a net whose later layers are reshaped at every forward as the
// selection changes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/net.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::BuildNet;
using testing::CheckGradients;
using testing::Data;
using testing::Diff;
using testing::MakeLayer;
using testing::Set;

constexpr const char* kFilter = "name: 'f' type: 'Filter'";

TEST(FilterLayerTest, KeepsTheSelectedSamplesByHand) {
  BlobSet bottom, top;
  Set(bottom.Add({}), {4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Set(bottom.Add({}), {4}, {5, 6, 7, 8});
  Set(bottom.Add({}), {4, 1}, {0, 1, 0, -2.5f});
  top.Add({});
  top.Add({});
  auto layer = MakeLayer(kFilter, Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  // Set-up, before any selector value: every sample (Caffe's first Reshape).
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{4, 2}));
  EXPECT_EQ(top[1]->shape(), (std::vector<int>{4}));

  layer->Forward(bottom.vec(), top.vec());
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 2}));
  EXPECT_EQ(Data(*top[0]), (std::vector<float>{10, 11, 30, 31}));
  EXPECT_EQ(Data(*top[1]), (std::vector<float>{6, 8}));

  Set(top[0], {2, 2}, {});
  std::copy_n(std::vector<float>{1, 2, 3, 4}.data(), 4, top[0]->mutable_cpu_diff());
  top[1]->mutable_cpu_diff()[0] = 7;
  top[1]->mutable_cpu_diff()[1] = 9;
  std::fill_n(bottom[0]->mutable_cpu_diff(), 8, 99.f);  // overwritten, never accumulated
  layer->Backward(top.vec(), {true, true, false}, bottom.vec());
  EXPECT_EQ(Diff(*bottom[0]), (std::vector<float>{0, 0, 1, 2, 0, 0, 3, 4}));
  EXPECT_EQ(Diff(*bottom[1]), (std::vector<float>{0, 7, 0, 9}));

  // A new selection at the next forward, then none at all.
  Set(bottom[2], {4, 1}, {1, 1, 0, 1});
  layer->Forward(bottom.vec(), top.vec());
  EXPECT_EQ(Data(*top[0]), (std::vector<float>{0, 1, 10, 11, 30, 31}));
  Set(bottom[2], {4, 1}, {0, 0, 0, 0});
  layer->Forward(bottom.vec(), top.vec());
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{0, 2}));
  EXPECT_EQ(top[1]->shape(), (std::vector<int>{0}));
  layer->Backward(top.vec(), {true, false, false}, bottom.vec());
  EXPECT_EQ(Diff(*bottom[0]), std::vector<float>(8, 0.f));
  // The selector never takes a gradient.
  EXPECT_TRUE(layer->AllowForceBackward(0));
  EXPECT_TRUE(layer->AllowForceBackward(1));
  EXPECT_FALSE(layer->AllowForceBackward(2));
}

TEST(FilterLayerTest, FiniteDifferences) {
  BlobSet bottom, top;
  BlobSet::FillGaussian(bottom.Add({5, 2, 3}), 3);
  BlobSet::FillGaussian(bottom.Add({5, 4}), 4);
  Set(bottom.Add({}), {5}, {1, 0, 1, 1, 0});
  top.Add({});
  top.Add({});
  auto layer = MakeLayer(kFilter, Engine::kFast);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  layer->Forward(bottom.vec(), top.vec());
  ASSERT_EQ(top[0]->shape(), (std::vector<int>{3, 2, 3}));
  testing::GradientCheckOptions options;
  options.bottoms = {0, 1};
  CheckGradients(*layer, bottom.vec(), top.vec(), options);
}

std::string SetUpError(const std::vector<std::vector<int>>& shapes, int tops) {
  BlobSet bottom, top;
  for (const auto& s : shapes) bottom.Add(s);
  for (int t = 0; t < tops; ++t) top.Add({});
  return MakeLayer(kFilter, Engine::kReference)->SetUp(bottom.vec(), top.vec()).message();
}

TEST(FilterLayerTest, BadShapesAreNamed) {
  EXPECT_EQ(SetUpError({{4, 2}, {4, 2}}, 1),
            "bottom 1 (the selector) must have one value per sample (every axis after the first "
            "1), got shape 4 2 (8)");
  EXPECT_EQ(SetUpError({{4, 2}, {3, 5}, {4}}, 2),
            "bottom 1 of shape 3 5 (15) must have the selector's 4 samples along axis 0");
  EXPECT_EQ(SetUpError({{4, 2}, {4}}, 2),
            "Filter layer needs one top per filtered bottom (bottoms but the last, the "
            "selector): 1 to filter, got 2 tops");
  EXPECT_EQ(SetUpError({{4, 2}}, 1), "Filter layer takes at least 2 bottoms, got 1");
}

// x (4 x 3), target (4 x 2), selector (4): the kept samples go through an
// InnerProduct (weights 0.5, bias 1) into a EuclideanLoss against the kept
// targets; the layers after the Filter follow the selection at every forward.
constexpr const char* kFilterNet = R"(
force_backward: true
layer { name: 'in' type: 'Input' top: 'x' top: 't' top: 's'
        input_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 } shape { dim: 4 } } }
layer { name: 'f' type: 'Filter' bottom: 'x' bottom: 't' bottom: 's' top: 'fx' top: 'ft' }
layer { name: 'ip' type: 'InnerProduct' bottom: 'fx' top: 'y'
        inner_product_param { num_output: 2 weight_filler { type: 'constant' value: 0.5 }
                              bias_filler { type: 'constant' value: 1 } } }
layer { name: 'loss' type: 'EuclideanLoss' bottom: 'y' bottom: 'ft' top: 'loss' }
)";

TEST(FilterLayerTest, LayersAfterItFollowTheSelectionEveryForward) {
  auto net = BuildNet(kFilterNet);
  ASSERT_NE(net, nullptr);
  Set(net->blob_by_name("x"), {4, 3}, {1, 2, 3, 0, 0, 0, -1, 1, 2, 4, 4, 4});
  Set(net->blob_by_name("t"), {4, 2}, {7, 0, 1, 1, 2, 3, 9, 9});
  Blob* s = net->blob_by_name("s");
  Blob* y = net->blob_by_name("y");
  // y_n = 0.5 * sum(x_n) + 1 in both outputs: 4, 1, 2, 7.
  Set(s, {4}, {1, 0, 1, 1});
  float loss = net->Forward();
  ASSERT_TRUE(net->RuntimeStatus().ok());
  EXPECT_EQ(y->shape(), (std::vector<int>{3, 2}));
  EXPECT_EQ(Data(*y), (std::vector<float>{4, 4, 2, 2, 7, 7}));
  // ((4-7)^2 + 4^2 + 0 + 1 + 4 + 4) / (2 * 3)
  EXPECT_FLOAT_EQ(loss, 34.f / 6.f);
  net->Backward();
  // d/dx of sample n: 0.5 * sum_j (y_nj - t_nj) / 3 in every input; 0 for the dropped one.
  const Blob* x = net->blob_by_name("x");
  EXPECT_FLOAT_EQ(x->cpu_diff()[0], 0.5f * (-3 + 4) / 3);
  EXPECT_FLOAT_EQ(x->cpu_diff()[3], 0.f);
  EXPECT_FLOAT_EQ(x->cpu_diff()[6], 0.5f * (0 - 1) / 3);

  Set(s, {4}, {0, 1, 0, 0});
  loss = net->Forward();
  EXPECT_EQ(y->shape(), (std::vector<int>{1, 2}));
  EXPECT_EQ(Data(*y), (std::vector<float>{1, 1}));
  EXPECT_FLOAT_EQ(loss, 0.f);
  Set(s, {4}, {1, 1, 1, 1});
  loss = net->Forward();
  EXPECT_EQ(y->shape(), (std::vector<int>{4, 2}));
  EXPECT_FLOAT_EQ(loss, (9 + 16 + 0 + 0 + 0 + 1 + 4 + 4) / 8.f);

  Set(s, {4}, {0, 1, 1, 0});
  testing::CheckNetGradient(*net, net->blob_by_name("x"), "x");
  testing::CheckNetGradient(*net, net->layers()[2]->blobs()[0].get(), "ip weights");
}

TEST(FilterLayerTest, ALaterLayerThatRefusesTheNewShapeStopsTheForward) {
  auto net = BuildNet(R"(
layer { name: 'in' type: 'Input' top: 'x' top: 's'
        input_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }
layer { name: 'f' type: 'Filter' bottom: 'x' bottom: 's' top: 'fx' }
layer { name: 'r' type: 'Reshape' bottom: 'fx' top: 'r'
        reshape_param { shape { dim: 4 dim: -1 } } }
)");
  ASSERT_NE(net, nullptr);
  Set(net->blob_by_name("s"), {4}, {1, 1, 1, 1});
  net->Forward();
  EXPECT_TRUE(net->RuntimeStatus().ok());
  Set(net->blob_by_name("s"), {4}, {1, 0, 1, 1});
  net->Forward();
  EXPECT_EQ(
      net->RuntimeStatus().message(),
      "<net>: layer 'r' (Reshape): bottom count 9 is not a multiple of the given dims' product 4; "
      "cannot infer the -1 dim");
  Set(net->blob_by_name("s"), {4}, {1, 1, 1, 1});
  net->Forward();
  EXPECT_TRUE(net->RuntimeStatus().ok());
}

// The GPU path: the same by-hand selection, then finite differences and the
// reference's numbers for a random selector.
TEST(FilterLayerTest, GpuPathAgreesWithTheReference) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  BlobSet bottom, top;
  Set(bottom.Add({}), {4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Set(bottom.Add({}), {4, 1}, {0, 1, 0, -2.5f});
  top.Add({});
  auto layer = MakeLayer(kFilter, Engine::kGpu);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  ASSERT_TRUE(layer->HasGpuPath());
  EXPECT_EQ(layer->Implementation(), "gpu");
  layer->Forward(bottom.vec(), top.vec());
  EXPECT_EQ(Data(*top[0]), (std::vector<float>{10, 11, 30, 31}));
  std::copy_n(std::vector<float>{1, 2, 3, 4}.data(), 4, top[0]->mutable_cpu_diff());
  std::fill_n(bottom[0]->mutable_cpu_diff(), 8, 99.f);
  layer->Backward(top.vec(), {true, false}, bottom.vec());
  EXPECT_EQ(Diff(*bottom[0]), (std::vector<float>{0, 0, 1, 2, 0, 0, 3, 4}));
  testing::GradientCheckOptions options;
  options.bottoms = {0};
  CheckGradients(*layer, bottom.vec(), top.vec(), options);
}

}  // namespace
}  // namespace pstrain

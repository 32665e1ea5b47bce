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

TEST(SoftmaxLayerTest, ForwardByHandAndStableForLargeInputs) {
  const double z = std::exp(-2.0) + std::exp(-1.0) + 1.0;
  const double expected[3] = {std::exp(-2.0) / z, std::exp(-1.0) / z, 1.0 / z};
  for (float offset : {0.f, 1000.f, -1000.f}) {
    BlobSet bottom, top;
    bottom.Add({1, 3});
    top.Add({});
    for (int i = 0; i < 3; ++i) bottom[0]->mutable_cpu_data()[i] = offset + 1.f + i;
    auto layer = MakeLayer("type: 'Softmax'", Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    layer->Forward(bottom.vec(), top.vec());
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(top[0]->cpu_data()[i], expected[i], 1e-6) << offset;
  }
}

// Softmax over axis 1 of a [2, 3, 2] bottom: each (n, inner) column sums to one.
TEST(SoftmaxLayerTest, StridedAxisMatchesDoubleReference) {
  for (const char* param : {"", "softmax_param { axis: 1 }", "softmax_param { axis: -2 }"}) {
    BlobSet bottom, top;
    bottom.Add({2, 3, 2});
    top.Add({});
    BlobSet::FillGaussian(bottom[0], 9, 3.f);
    auto layer = MakeLayer(std::string("type: 'Softmax' ") + param, Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    EXPECT_EQ(top[0]->shape(), bottom[0]->shape());
    layer->Forward(bottom.vec(), top.vec());
    const float* x = bottom[0]->cpu_data();
    for (int n = 0; n < 2; ++n) {
      for (int in = 0; in < 2; ++in) {
        double sum = 0;
        for (int c = 0; c < 3; ++c) sum += std::exp(static_cast<double>(x[n * 6 + c * 2 + in]));
        for (int c = 0; c < 3; ++c) {
          const int i = n * 6 + c * 2 + in;
          EXPECT_NEAR(top[0]->cpu_data()[i], std::exp(static_cast<double>(x[i])) / sum, 1e-6);
        }
      }
    }
  }
}

TEST(SoftmaxLayerTest, BackwardByHand) {
  // y = [0.25, 0.75], dy = [1, 3]: <dy, y> = 2.5, dx = (dy - 2.5) * y.
  BlobSet bottom, top;
  bottom.Add({1, 2});
  top.Add({});
  bottom[0]->mutable_cpu_data()[0] = 0.f;
  bottom[0]->mutable_cpu_data()[1] = std::log(3.f);
  auto layer = MakeLayer("type: 'Softmax'", Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  layer->Forward(bottom.vec(), top.vec());
  EXPECT_NEAR(top[0]->cpu_data()[0], 0.25f, 1e-6);
  top[0]->mutable_cpu_diff()[0] = 1.f;
  top[0]->mutable_cpu_diff()[1] = 3.f;
  layer->Backward(top.vec(), {true}, bottom.vec());
  EXPECT_NEAR(bottom[0]->cpu_diff()[0], -1.5f * 0.25f, 1e-6);
  EXPECT_NEAR(bottom[0]->cpu_diff()[1], 0.5f * 0.75f, 1e-6);
}

TEST(SoftmaxLayerTest, InPlaceMatchesOutOfPlace) {
  BlobSet blobs;
  Blob* x = blobs.Add({2, 4, 3});
  Blob* y = blobs.Add({});
  Blob* same = blobs.Add({2, 4, 3});
  BlobSet::FillGaussian(x, 4);
  same->CopyFrom(*x);
  auto out_of_place = MakeLayer("type: 'Softmax'", Engine::kReference);
  auto in_place = MakeLayer("type: 'Softmax'", Engine::kReference);
  ASSERT_TRUE(out_of_place->SetUp({x}, {y}).ok());
  ASSERT_TRUE(in_place->SetUp({same}, {same}).ok());
  out_of_place->Forward({x}, {y});
  in_place->Forward({same}, {same});
  for (int i = 0; i < 24; ++i) {
    EXPECT_FLOAT_EQ(same->cpu_data()[i], y->cpu_data()[i]) << i;
    y->mutable_cpu_diff()[i] = same->mutable_cpu_diff()[i] = static_cast<float>(i % 5) - 2.f;
  }
  out_of_place->Backward({y}, {true}, {x});
  in_place->Backward({same}, {true}, {same});
  for (int i = 0; i < 24; ++i) EXPECT_FLOAT_EQ(same->cpu_diff()[i], x->cpu_diff()[i]) << i;
}

TEST(SoftmaxLayerTest, AxisOutOfRange) {
  BlobSet bottom, top;
  bottom.Add({2, 3});
  top.Add({});
  auto layer = MakeLayer("type: 'Softmax' softmax_param { axis: 2 }", Engine::kReference);
  EXPECT_EQ(layer->SetUp(bottom.vec(), top.vec()).message(),
            "axis 2 is out of range for bottom 0 of shape 2 3 (6)");
}

TEST(SoftmaxLayerTest, Gradients) {
  for (const char* param : {"", "softmax_param { axis: 2 }", "softmax_param { axis: 0 }"}) {
    BlobSet bottom, top;
    bottom.Add({2, 3, 2, 2});
    top.Add({});
    BlobSet::FillGaussian(bottom[0], 6);
    auto layer = MakeLayer(std::string("type: 'Softmax' ") + param, Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    CheckGradients(*layer, bottom.vec(), top.vec());
  }
}

}  // namespace
}  // namespace pstrain

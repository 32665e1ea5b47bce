// ReLU, Sigmoid, TanH and Dropout: element-wise layers that may run in place.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::CheckGradients;
using testing::GradientCheckOptions;
using testing::MakeLayer;

void SetData(Blob* blob, const std::vector<float>& values) {
  blob->Reshape({static_cast<int>(values.size())});
  std::copy(values.begin(), values.end(), blob->mutable_cpu_data());
}

void SetDiff(Blob* blob, const std::vector<float>& values) {
  std::copy(values.begin(), values.end(), blob->mutable_cpu_diff());
}

// Runs forward and backward (dy given) out of place and in place on `x`;
// checks y and dx against the expected values both times.
void ExpectForwardBackward(const std::string& prototxt, const std::vector<float>& x,
                           const std::vector<float>& dy, const std::vector<float>& y,
                           const std::vector<float>& dx) {
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "out of place");
    BlobSet blobs;
    Blob* bottom = blobs.Add({});
    Blob* top = in_place ? bottom : blobs.Add({});
    SetData(bottom, x);
    auto layer = MakeLayer(prototxt, Engine::kReference);
    Status s = layer->SetUp({bottom}, {top});
    ASSERT_TRUE(s.ok()) << s.message();
    layer->Forward({bottom}, {top});
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(top->cpu_data()[i], y[i], 1e-6) << i;
    SetDiff(top, dy);
    layer->Backward({top}, {true}, {bottom});
    for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(bottom->cpu_diff()[i], dx[i], 1e-6) << i;
  }
}

TEST(ReLULayerTest, ForwardBackwardByHand) {
  const std::vector<float> x = {-2, -0.5f, 0, 1, 3};
  const std::vector<float> dy = {1, 2, 3, 4, 5};
  ExpectForwardBackward("type: 'ReLU'", x, dy, {0, 0, 0, 1, 3}, {0, 0, 0, 4, 5});
  ExpectForwardBackward("type: 'ReLU' relu_param { negative_slope: 0.1 }", x, dy,
                        {-0.2f, -0.05f, 0, 1, 3}, {0.1f, 0.2f, 0.3f, 4, 5});
}

// ReLU's loops select through an integer mask (so that they vectorise): the
// bits are those of x > 0 ? x : slope x (and dy, slope dy backward), signed
// zeros, infinities and NaN included, in and out of place, over a length
// that runs the vector body and its tail.
TEST(ReLULayerTest, BitsAreThoseOfTheSelect) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> pattern = {-0.f, 0.f, -1.5f, 2.f, inf, -inf, nan, -1e-38f, 3e-39f};
  std::vector<float> x, dy;
  for (int i = 0; i < 131; ++i) {
    x.push_back(pattern[i % pattern.size()]);
    dy.push_back(pattern[(i + 4) % pattern.size()]);
  }
  const auto bits = [](float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  for (const float slope : {0.f, 0.1f, -2.f}) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE("slope " + std::to_string(slope) + (in_place ? " in place" : ""));
      BlobSet blobs;
      Blob* bottom = blobs.Add({});
      Blob* top = in_place ? bottom : blobs.Add({});
      SetData(bottom, x);
      std::ostringstream proto;
      proto << "type: 'ReLU' relu_param { negative_slope: " << slope << " }";
      auto layer = MakeLayer(proto.str(), Engine::kReference);
      ASSERT_TRUE(layer->SetUp({bottom}, {top}).ok());
      layer->Forward({bottom}, {top});
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(bits(top->cpu_data()[i]), bits(x[i] > 0.f ? x[i] : slope * x[i]))
            << i << ": " << x[i];
      }
      if (in_place) continue;  // backward reads the bottom, which in place holds y
      SetDiff(top, dy);
      layer->Backward({top}, {true}, {bottom});
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(bits(bottom->cpu_diff()[i]), bits(x[i] > 0.f ? dy[i] : slope * dy[i]))
            << i << ": " << x[i] << ", " << dy[i];
      }
    }
  }
}

TEST(ReLULayerTest, Gradients) {
  for (const char* proto : {"type: 'ReLU'", "type: 'ReLU' relu_param { negative_slope: 0.2 }"}) {
    BlobSet bottom, top;
    bottom.Add({2, 3, 4});
    top.Add({});
    BlobSet::FillGaussian(bottom[0], 3);
    auto layer = MakeLayer(proto, Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    GradientCheckOptions options;
    options.kink = 0.f;
    options.kink_range = 0.02f;
    CheckGradients(*layer, bottom.vec(), top.vec(), options);
  }
}

TEST(SigmoidLayerTest, ForwardBackwardByHand) {
  const float ln3 = std::log(3.f);
  ExpectForwardBackward("type: 'Sigmoid'", {0, ln3, -ln3, 100, -100}, {1, 1, 2, 1, 1},
                        {0.5f, 0.75f, 0.25f, 1, 0}, {0.25f, 0.1875f, 0.375f, 0, 0});
}

TEST(TanHLayerTest, ForwardBackwardByHand) {
  const float a = std::atanh(0.5f);
  ExpectForwardBackward("type: 'TanH'", {0, a, -a, 50}, {1, 2, 2, 1}, {0, 0.5f, -0.5f, 1},
                        {1, 1.5f, 1.5f, 0});
}

TEST(NeuronLayersTest, SigmoidAndTanHGradients) {
  for (const char* proto : {"type: 'Sigmoid'", "type: 'TanH'"}) {
    BlobSet bottom, top;
    bottom.Add({2, 3, 4});
    top.Add({});
    BlobSet::FillGaussian(bottom[0], 11, 2.f);
    auto layer = MakeLayer(proto, Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    CheckGradients(*layer, bottom.vec(), top.vec());
  }
}

TEST(NeuronLayersTest, OutputShapeFollowsBottom) {
  for (const char* type : {"ReLU", "Sigmoid", "TanH", "Dropout"}) {
    BlobSet bottom, top;
    bottom.Add({2, 3, 4, 5});
    top.Add({});
    auto layer = MakeLayer(std::string("type: '") + type + "'", Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    EXPECT_EQ(top[0]->shape(), bottom[0]->shape()) << type;
    bottom[0]->Reshape({7, 2});
    ASSERT_TRUE(layer->Reshape(bottom.vec(), top.vec()).ok());
    EXPECT_EQ(top[0]->shape(), (std::vector<int>{7, 2})) << type;
    BlobSet two;
    two.Add({1});
    two.Add({1});
    EXPECT_EQ(layer->SetUp(two.vec(), top.vec()).message(),
              std::string(type) + " layer takes 1 bottom, got 2");
  }
}

std::string DropoutProto(const std::string& phase, float ratio, const std::string& name = "drop") {
  return "name: '" + name + "' type: 'Dropout' phase: " + phase +
         " dropout_param { dropout_ratio: " + std::to_string(ratio) + " }";
}

TEST(DropoutLayerTest, RatioMustBeBelowOne) {
  BlobSet bottom, top;
  bottom.Add({4});
  top.Add({});
  for (float ratio : {1.f, -0.5f}) {
    auto layer = MakeLayer(DropoutProto("TRAIN", ratio), Engine::kReference);
    std::ostringstream expected;
    expected << "dropout_ratio must be in [0, 1), got " << ratio;
    EXPECT_EQ(layer->SetUp(bottom.vec(), top.vec()).message(), expected.str());
  }
}

TEST(DropoutLayerTest, TrainStatisticsAndBackwardMask) {
  for (float ratio : {0.5f, 0.2f}) {
    SCOPED_TRACE(ratio);
    const int n = 100000;
    BlobSet bottom, top;
    bottom.Add({10, n / 10});
    top.Add({});
    BlobSet::FillUniform(bottom[0], 7, 1.f, 3.f);
    auto layer = MakeLayer(DropoutProto("TRAIN", ratio), Engine::kReference);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
    layer->Forward(bottom.vec(), top.vec());
    const float scale = 1.f / (1.f - ratio);
    const float* x = bottom[0]->cpu_data();
    const float* y = top[0]->cpu_data();
    int kept = 0;
    double sum_x = 0, sum_y = 0;
    for (int i = 0; i < n; ++i) {
      if (y[i] != 0.f) {
        ++kept;
        ASSERT_FLOAT_EQ(y[i], x[i] * scale) << i;
      }
      sum_x += x[i];
      sum_y += y[i];
    }
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - ratio, 0.01);
    EXPECT_NEAR(sum_y / n, sum_x / n, 0.02 * sum_x / n);

    float* dy = top[0]->mutable_cpu_diff();
    for (int i = 0; i < n; ++i) dy[i] = static_cast<float>(i % 7) - 3.f;
    layer->Backward(top.vec(), {true}, bottom.vec());
    const float* dx = bottom[0]->cpu_diff();
    for (int i = 0; i < n; ++i) {
      const float expected = y[i] != 0.f ? (static_cast<float>(i % 7) - 3.f) * scale : 0.f;
      ASSERT_FLOAT_EQ(dx[i], expected) << i;
    }
  }
}

TEST(DropoutLayerTest, TestPhaseIsIdentity) {
  ExpectForwardBackward(DropoutProto("TEST", 0.5f), {1, -2, 3, 4}, {0.5f, 1, 2, -1}, {1, -2, 3, 4},
                        {0.5f, 1, 2, -1});
}

TEST(DropoutLayerTest, TestPhaseGradients) {
  BlobSet bottom, top;
  bottom.Add({3, 4});
  top.Add({});
  BlobSet::FillGaussian(bottom[0], 2);
  auto layer = MakeLayer(DropoutProto("TEST", 0.3f), Engine::kReference);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  CheckGradients(*layer, bottom.vec(), top.vec());
}

// The mask of the first TRAIN forward for a layer name and net seed.
std::vector<float> FirstMask(const std::string& name, uint64_t seed, bool in_place) {
  BlobSet blobs;
  Blob* bottom = blobs.Add({1000});
  Blob* top = in_place ? bottom : blobs.Add({});
  for (int i = 0; i < 1000; ++i) bottom->mutable_cpu_data()[i] = 1.f;
  auto layer = MakeLayer(DropoutProto("TRAIN", 0.5f, name), Engine::kReference);
  NetContext context;
  context.seed = seed;
  layer->set_context(context);
  EXPECT_TRUE(layer->SetUp({bottom}, {top}).ok());
  layer->Forward({bottom}, {top});
  // Backward in place with dy = 1 must give the mask itself.
  for (int i = 0; i < 1000; ++i) top->mutable_cpu_diff()[i] = 1.f;
  layer->Backward({top}, {true}, {bottom});
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(bottom->cpu_diff()[i], top->cpu_data()[i]) << i;
  return std::vector<float>(top->cpu_data(), top->cpu_data() + 1000);
}

TEST(DropoutLayerTest, MaskIsReproducibleAndInPlaceSafe) {
  const std::vector<float> mask = FirstMask("drop1", 5, false);
  for (float m : mask) ASSERT_TRUE(m == 0.f || m == 2.f) << m;
  EXPECT_EQ(FirstMask("drop1", 5, true), mask);
  EXPECT_NE(FirstMask("drop2", 5, false), mask);
  EXPECT_NE(FirstMask("drop1", 6, false), mask);
}

}  // namespace
}  // namespace pstrain

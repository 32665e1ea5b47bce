#include <gtest/gtest.h>

#include <cmath>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::MakeLayer;

constexpr double kEps = 1e-5;

// 2 x 2 x 1 x 2; channel 0 holds 1 3 | 5 7 (mean 4, var 5),
// channel 1 holds 2 2 | 4 8 (mean 4, var 6). Index (n, c, w) = n*4 + c*2 + w.
void FillSmall(Blob* x, float factor = 1.f) {
  const float values[8] = {1, 3, 2, 2, 5, 7, 4, 8};
  for (int i = 0; i < 8; ++i) x->mutable_cpu_data()[i] = values[i] * factor;
}

// Param diffs get a sentinel that Backward must leave alone.
constexpr float kSentinel = 42.f;
void CpuSetForTest(Blob* blob) {
  for (int64_t i = 0; i < blob->count(); ++i) blob->mutable_cpu_diff()[i] = kSentinel;
}
void ExpectUntouchedDiff(const Blob& blob) {
  for (int64_t i = 0; i < blob.count(); ++i) EXPECT_EQ(blob.cpu_diff()[i], kSentinel) << i;
}

void CpuCopyDiffFromData(Blob* blob) {
  for (int64_t i = 0; i < blob->count(); ++i) blob->mutable_cpu_diff()[i] = blob->cpu_data()[i];
}

template <typename EngineTag>
class BatchNormLayerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Layer> Make(const std::string& extra) {
    return MakeLayer("name: 'bn' type: 'BatchNorm' " + extra, EngineTag::kEngine);
  }
};
TYPED_TEST_SUITE(BatchNormLayerTest, testing::LayerEngines);

TYPED_TEST(BatchNormLayerTest, BlobsAreThreeFixedStatistics) {
  BlobSet b, t;
  b.Add({2, 3, 4, 5});
  t.Add({});
  auto layer = this->Make("");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  ASSERT_EQ(layer->blobs().size(), 3u);
  EXPECT_EQ(layer->blobs()[0]->shape(), std::vector<int>({3}));
  EXPECT_EQ(layer->blobs()[1]->shape(), std::vector<int>({3}));
  EXPECT_EQ(layer->blobs()[2]->shape(), std::vector<int>({1}));
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(layer->param_propagate_down(i));
    for (int64_t j = 0; j < layer->blobs()[i]->count(); ++j) {
      EXPECT_EQ(layer->blobs()[i]->cpu_data()[j], 0.f);
    }
  }
  EXPECT_EQ(t[0]->shape(), std::vector<int>({2, 3, 4, 5}));
}

TYPED_TEST(BatchNormLayerTest, Errors) {
  BlobSet b, t;
  b.Add({2, 3, 4});
  t.Add({});
  auto learned = this->Make("param { lr_mult: 0 } param { lr_mult: 1 }");
  Status s = learned->SetUp(b.vec(), t.vec());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "Cannot configure batch normalization statistics as "
            "layer parameters (param 1 has "
            "lr_mult 1.000000)");
  auto layer = this->Make("param { lr_mult: 0 } param { lr_mult: 0 } param { lr_mult: 0 }");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  b[0]->Reshape({2, 4, 4});
  s = layer->Reshape(b.vec(), t.vec());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "bottom 0 has shape 2 4 4 (32); BatchNorm was set up for 3 channels");
}

TYPED_TEST(BatchNormLayerTest, TrainForwardAndRunningStatistics) {
  BlobSet b, t;
  FillSmall(b.Add({2, 2, 1, 2}));
  t.Add({});
  auto layer = this->Make("phase: TRAIN");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  layer->Forward(b.vec(), t.vec());
  const double expected[8] = {-3 / std::sqrt(5 + kEps),
                              -1 / std::sqrt(5 + kEps),
                              -2 / std::sqrt(6 + kEps),
                              -2 / std::sqrt(6 + kEps),
                              1 / std::sqrt(5 + kEps),
                              3 / std::sqrt(5 + kEps),
                              0,
                              4 / std::sqrt(6 + kEps)};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(t[0]->cpu_data()[i], expected[i], 1e-5) << i;
  auto& blobs = layer->blobs();
  // m = 4 values per channel: variance sums carry the factor 4/3.
  EXPECT_NEAR(blobs[2]->cpu_data()[0], 1.0, 1e-6);
  EXPECT_NEAR(blobs[0]->cpu_data()[0], 4.0, 1e-5);
  EXPECT_NEAR(blobs[0]->cpu_data()[1], 4.0, 1e-5);
  EXPECT_NEAR(blobs[1]->cpu_data()[0], 5.0 * 4 / 3, 1e-5);
  EXPECT_NEAR(blobs[1]->cpu_data()[1], 6.0 * 4 / 3, 1e-5);
  // Second batch: doubled values, mean 8 and 8, var 20 and 24.
  FillSmall(b[0], 2.f);
  layer->Forward(b.vec(), t.vec());
  EXPECT_NEAR(blobs[2]->cpu_data()[0], 1.999, 1e-6);
  EXPECT_NEAR(blobs[0]->cpu_data()[0], 8 + 0.999 * 4, 1e-4);
  EXPECT_NEAR(blobs[1]->cpu_data()[0], (20 + 0.999 * 5) * 4 / 3, 1e-4);
  EXPECT_NEAR(blobs[1]->cpu_data()[1], (24 + 0.999 * 6) * 4 / 3, 1e-4);
}

TYPED_TEST(BatchNormLayerTest, GlobalStatisticsForwardBackward) {
  BlobSet b, t;
  FillSmall(b.Add({2, 2, 1, 2}));
  t.Add({});
  auto layer = this->Make("phase: TEST");  // use_global_stats defaults to true in TEST
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  auto& blobs = layer->blobs();
  blobs[0]->mutable_cpu_data()[0] = 2;  // stored mean 1, 2 and var 4, 9 with s = 2
  blobs[0]->mutable_cpu_data()[1] = 4;
  blobs[1]->mutable_cpu_data()[0] = 8;
  blobs[1]->mutable_cpu_data()[1] = 18;
  blobs[2]->mutable_cpu_data()[0] = 2;
  layer->Forward(b.vec(), t.vec());
  const float x[8] = {1, 3, 2, 2, 5, 7, 4, 8};
  for (int i = 0; i < 8; ++i) {
    const int c = (i / 2) % 2;
    const double sd = std::sqrt((c == 0 ? 4 : 9) + kEps);
    EXPECT_NEAR(t[0]->cpu_data()[i], (x[i] - (c == 0 ? 1 : 2)) / sd, 1e-5) << i;
  }
  EXPECT_EQ(blobs[2]->cpu_data()[0], 2.f);  // not updated
  for (auto& p : blobs) CpuSetForTest(p.get());
  for (int i = 0; i < 8; ++i) t[0]->mutable_cpu_diff()[i] = static_cast<float>(i + 1);
  layer->Backward(t.vec(), {true}, b.vec());
  for (int i = 0; i < 8; ++i) {
    const int c = (i / 2) % 2;
    EXPECT_NEAR(b[0]->cpu_diff()[i], (i + 1) / std::sqrt((c == 0 ? 4 : 9) + kEps), 1e-5) << i;
  }
  for (auto& p : blobs) ExpectUntouchedDiff(*p);
}

TYPED_TEST(BatchNormLayerTest, ZeroNormaliserMeansZeroStatistics) {
  BlobSet b, t;
  FillSmall(b.Add({2, 2, 1, 2}));
  t.Add({});
  auto layer = this->Make("batch_norm_param { use_global_stats: true }");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  layer->blobs()[0]->mutable_cpu_data()[0] = 3;  // ignored: s = 0
  layer->Forward(b.vec(), t.vec());
  for (int i = 0; i < 8; ++i) {
    EXPECT_NEAR(t[0]->cpu_data()[i], b[0]->cpu_data()[i] / std::sqrt(kEps), 1e-2) << i;
  }
}

TYPED_TEST(BatchNormLayerTest, ExplicitBatchStatisticsInTest) {
  BlobSet b, t;
  FillSmall(b.Add({2, 2, 1, 2}));
  t.Add({});
  auto layer = this->Make("phase: TEST batch_norm_param { use_global_stats: false }");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  layer->Forward(b.vec(), t.vec());
  EXPECT_NEAR(t[0]->cpu_data()[0], -3 / std::sqrt(5 + kEps), 1e-5);
  EXPECT_NEAR(layer->blobs()[2]->cpu_data()[0], 1.0, 1e-6);
}

TYPED_TEST(BatchNormLayerTest, TrainBackwardLeavesStatisticsDiffs) {
  BlobSet b, t;
  BlobSet::FillGaussian(b.Add({3, 2, 2, 2}), 3);
  t.Add({});
  auto layer = this->Make("phase: TRAIN");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  layer->Forward(b.vec(), t.vec());
  for (auto& p : layer->blobs()) CpuSetForTest(p.get());
  for (int64_t i = 0; i < t[0]->count(); ++i) t[0]->mutable_cpu_diff()[i] = 0.1f * i;
  layer->Backward(t.vec(), {true}, b.vec());
  for (auto& p : layer->blobs()) ExpectUntouchedDiff(*p);
}

TYPED_TEST(BatchNormLayerTest, GradientTrain) {
  BlobSet b, t;
  BlobSet::FillGaussian(b.Add({3, 2, 2, 3}), 7);
  t.Add({});
  auto layer = this->Make("phase: TRAIN");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  testing::GradientCheckOptions options;
  options.check_params = false;
  testing::CheckGradients(*layer, b.vec(), t.vec(), options);
}

TYPED_TEST(BatchNormLayerTest, GradientGlobalStatistics) {
  BlobSet b, t;
  BlobSet::FillGaussian(b.Add({2, 3, 4}), 8);
  t.Add({});
  auto layer = this->Make("phase: TEST");
  ASSERT_TRUE(layer->SetUp(b.vec(), t.vec()).ok());
  for (int c = 0; c < 3; ++c) {
    layer->blobs()[0]->mutable_cpu_data()[c] = 0.5f * c;
    layer->blobs()[1]->mutable_cpu_data()[c] = 1.f + c;
  }
  layer->blobs()[2]->mutable_cpu_data()[0] = 1.5f;
  testing::GradientCheckOptions options;
  options.check_params = false;
  testing::CheckGradients(*layer, b.vec(), t.vec(), options);
}

TYPED_TEST(BatchNormLayerTest, InPlaceMatchesOutOfPlace) {
  for (const char* phase : {"phase: TRAIN", "phase: TEST"}) {
    BlobSet b, t, shared;
    BlobSet::FillGaussian(b.Add({2, 3, 2, 2}), 9);
    t.Add({});
    Blob* io = shared.Add({2, 3, 2, 2});
    io->CopyFrom(*b[0]);
    auto out_of_place = this->Make(phase);
    auto in_place = this->Make(phase);
    ASSERT_TRUE(out_of_place->SetUp(b.vec(), t.vec()).ok());
    ASSERT_TRUE(in_place->SetUp(shared.vec(), shared.vec()).ok());
    for (Layer* layer : {in_place.get(), out_of_place.get()}) {
      layer->blobs()[0]->mutable_cpu_data()[1] = 0.7f;
      layer->blobs()[1]->mutable_cpu_data()[1] = 0.7f;
      layer->blobs()[2]->mutable_cpu_data()[0] = 0.5f;
    }
    out_of_place->Forward(b.vec(), t.vec());
    in_place->Forward(shared.vec(), shared.vec());
    testing::ExpectBlobsNear(t[0]->cpu_data(), io->cpu_data(), io->count(), 1e-6f, phase);
    for (int64_t i = 0; i < io->count(); ++i) {
      t[0]->mutable_cpu_diff()[i] = io->mutable_cpu_diff()[i] = 0.05f * static_cast<float>(i);
    }
    out_of_place->Backward(t.vec(), {true}, b.vec());
    in_place->Backward(shared.vec(), {true}, shared.vec());
    testing::ExpectBlobsNear(b[0]->cpu_diff(), io->cpu_diff(), io->count(), 1e-5f, phase);
  }
}

TEST(BatchNormEnginesTest, TrainAgree) {
  testing::ExpectEnginesAgree("name: 'bn' type: 'BatchNorm' phase: TRAIN", {{4, 16, 8, 8}},
                              [](const BlobVec& b) { BlobSet::FillGaussian(b[0], 21, 3.f); });
}

TEST(BatchNormEnginesTest, GlobalStatisticsAgree) {
  testing::ExpectEnginesAgree("name: 'bn' type: 'BatchNorm' phase: TEST", {{4, 16, 8, 8}},
                              [](const BlobVec& b) { BlobSet::FillGaussian(b[0], 22, 0.01f); });
}

// Loaded statistics, two training steps then a global-statistics pass: tops,
// bottom diffs and the running statistics agree between engines.
TEST(BatchNormEnginesTest, RunningStatisticsAgree) {
  BlobSet b[2], t[2];
  std::unique_ptr<Layer> train[2], test[2];
  const Engine engines[2] = {Engine::kReference, Engine::kFast};
  for (int e = 0; e < 2; ++e) {
    b[e].Add({4, 16, 8, 8});
    t[e].Add({});
    train[e] = MakeLayer("name: 'bn' type: 'BatchNorm' phase: TRAIN", engines[e]);
    test[e] = MakeLayer("name: 'bn' type: 'BatchNorm' phase: TEST", engines[e]);
    ASSERT_TRUE(train[e]->SetUp(b[e].vec(), t[e].vec()).ok());
    ASSERT_TRUE(test[e]->SetUp(b[e].vec(), t[e].vec()).ok());
    test[e]->blobs() = train[e]->blobs();  // shared statistics, as a net shares weights
    for (int step = 0; step < 2; ++step) {
      BlobSet::FillGaussian(b[e][0], 30 + step, 2.f + step);
      train[e]->Forward(b[e].vec(), t[e].vec());
    }
    BlobSet::FillGaussian(b[e][0], 40, 2.f);
    test[e]->Forward(b[e].vec(), t[e].vec());
    BlobSet::FillGaussian(t[e][0], 41);
    CpuCopyDiffFromData(t[e][0]);
    test[e]->Backward(t[e].vec(), {true}, b[e].vec());
  }
  for (int i = 0; i < 3; ++i) {
    testing::ExpectBlobsNear(train[0]->blobs()[i]->cpu_data(), train[1]->blobs()[i]->cpu_data(),
                             train[0]->blobs()[i]->count(), 1e-4f,
                             "statistics " + std::to_string(i));
  }
  EXPECT_NEAR(train[1]->blobs()[2]->cpu_data()[0], 1.999f, 1e-6);
  testing::ExpectBlobsNear(t[0][0]->cpu_data(), t[1][0]->cpu_data(), t[0][0]->count(), 1e-4f,
                           "top");
  testing::ExpectBlobsNear(b[0][0]->cpu_diff(), b[1][0]->cpu_diff(), b[0][0]->count(), 1e-4f,
                           "bottom diff");
}

}  // namespace
}  // namespace pstrain

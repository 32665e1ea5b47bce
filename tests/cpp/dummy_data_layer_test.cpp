// DummyData layer: shapes, shape errors and fillers; random tops drawn sample
// by sample, so that W workers draw what one worker with W times the batch draws.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;

Status SetUpTops(Layer& layer, BlobSet& tops, int n) {
  for (int i = 0; i < n; ++i) tops.Add({1});
  return layer.SetUp({}, tops.vec());
}

TEST(DummyDataLayerTest, DefaultIsZeroAndConstantsAreNotRefilled) {
  auto layer = testing::MakeLayer(
      "name: 'd' type: 'DummyData' top: 'a' top: 'b' "
      "dummy_data_param { shape { dim: 2 dim: 3 } }",
      Engine::kFast);
  BlobSet tops;
  ASSERT_TRUE(SetUpTops(*layer, tops, 2).ok());
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(tops[t]->shape(), (std::vector<int>{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(tops[t]->cpu_data()[i], 0.f);
  }
  tops[0]->mutable_cpu_data()[1] = 9.f;  // a constant top is not refilled
  layer->Forward({}, tops.vec());
  EXPECT_EQ(tops[0]->cpu_data()[1], 9.f);
}

TEST(DummyDataLayerTest, LegacyShapesAndPerTopFillers) {
  auto layer = testing::MakeLayer(
      "name: 'd' type: 'DummyData' top: 'a' top: 'b' dummy_data_param { "
      "num: 2 channels: 3 channels: 1 height: 4 width: 5 width: 1 "
      "data_filler { type: 'constant' value: 7 } "
      "data_filler { type: 'uniform' min: 1 max: 2 } }",
      Engine::kFast);
  BlobSet tops;
  Status s = SetUpTops(*layer, tops, 2);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(tops[0]->shape(), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(tops[1]->shape(), (std::vector<int>{2, 1, 4, 1}));
  for (int i = 0; i < tops[0]->count(); ++i) ASSERT_EQ(tops[0]->cpu_data()[i], 7.f);
  layer->Forward({}, tops.vec());
  std::vector<float> first(tops[1]->cpu_data(), tops[1]->cpu_data() + 8);
  for (float v : first) {
    EXPECT_GE(v, 1.f);
    EXPECT_LE(v, 2.f);
  }
  layer->Forward({}, tops.vec());  // the uniform top is refilled every forward
  std::vector<float> second(tops[1]->cpu_data(), tops[1]->cpu_data() + 8);
  EXPECT_NE(first, second);
}

TEST(DummyDataLayerTest, Errors) {
  auto error = [](const std::string& param, int num_tops) {
    std::string tops;
    for (int i = 0; i < num_tops; ++i) tops += "top: 't" + std::to_string(i) + "' ";
    auto layer = testing::MakeLayer(
        "name: 'd' type: 'DummyData' " + tops + "dummy_data_param { " + param + " }",
        Engine::kFast);
    BlobSet blobs;
    Status s = SetUpTops(*layer, blobs, num_tops);
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  EXPECT_EQ(error("", 1),
            "dummy_data_param.shape must be given once or once per top: 1 tops, 0 "
            "shapes");
  EXPECT_EQ(error("shape { dim: 1 } shape { dim: 2 }", 3),
            "dummy_data_param.shape must be given once or once per top: 3 tops, 2 shapes");
  EXPECT_EQ(error("shape { dim: 1 } num: 1 channels: 1 height: 1 width: 1", 1),
            "dummy_data_param: give either shape or num/channels/height/width, not both");
  EXPECT_EQ(error("num: 1 num: 2 channels: 1 height: 1 width: 1", 3),
            "dummy_data_param.num must be given once or once per top: 3 tops, 2 values");
  EXPECT_EQ(error("num: 1 channels: 1 height: 1", 1),
            "dummy_data_param.width must be given once or once per top: 1 tops, 0 values");
  EXPECT_EQ(error("shape { dim: 1 } data_filler { } data_filler { }", 3),
            "dummy_data_param.data_filler must be given 0, 1 or once per top: 3 tops, 2 fillers");
  EXPECT_EQ(error("shape { dim: 1 } data_filler { type: 'nope' }", 1),
            "data_filler for top 0: unknown filler type 'nope' (known: constant, uniform, "
            "gaussian, xavier, msra, positive_unitball, bilinear)");
}

// A DummyData layer whose tops 'a' {batch, 3, 2} and 'b' {batch} use `filler`,
// set up as worker `rank` of `world`; the values of its next `steps` forwards.
struct Drawn {
  std::vector<std::vector<float>> a, b;  // per step
};

Drawn Draw(const std::string& filler, int batch, int rank, int world, int steps,
           uint64_t seed = 1701, int64_t seek = -1) {
  auto layer = testing::MakeLayer(
      "name: 'd' type: 'DummyData' top: 'a' top: 'b' dummy_data_param { "
      "shape { dim: " +
          std::to_string(batch) + " dim: 3 dim: 2 } shape { dim: " + std::to_string(batch) +
          " } data_filler { " + filler + " } }",
      Engine::kFast);
  NetContext context = layer->context();
  context.rank = rank;
  context.world_size = world;
  context.seed = seed;
  layer->set_context(context);
  BlobSet tops;
  tops.Add({1});
  tops.Add({1});
  Status s = layer->SetUp({}, tops.vec());
  EXPECT_TRUE(s.ok()) << s.message();
  if (seek >= 0) layer->SeekToBatch(seek);
  Drawn drawn;
  for (int t = 0; t < steps; ++t) {
    layer->Forward({}, tops.vec());
    drawn.a.emplace_back(tops[0]->cpu_data(), tops[0]->cpu_data() + tops[0]->count());
    drawn.b.emplace_back(tops[1]->cpu_data(), tops[1]->cpu_data() + tops[1]->count());
  }
  return drawn;
}

std::vector<float> Concat(const std::vector<float>& x, const std::vector<float>& y) {
  std::vector<float> out = x;
  out.insert(out.end(), y.begin(), y.end());
  return out;
}

TEST(DummyDataLayerTest, TwoWorkersOfFourDrawExactlyWhatOneWorkerOfEightDraws) {
  for (const std::string filler :
       {"type: 'gaussian' mean: 1 std: 2", "type: 'uniform' min: -3 max: 5",
        "type: 'gaussian' std: 1 sparse: 3", "type: 'xavier' variance_norm: FAN_OUT",
        "type: 'msra' variance_norm: AVERAGE", "type: 'positive_unitball'"}) {
    SCOPED_TRACE(filler);
    const Drawn one = Draw(filler, 8, 0, 1, 3);
    const Drawn first = Draw(filler, 4, 0, 2, 3);
    const Drawn second = Draw(filler, 4, 1, 2, 3);
    for (int t = 0; t < 3; ++t) {
      ASSERT_EQ(one.a[t].size(), 48u);
      EXPECT_EQ(Concat(first.a[t], second.a[t]), one.a[t]) << "step " << t;
      EXPECT_EQ(Concat(first.b[t], second.b[t]), one.b[t]) << "step " << t;
    }
    // Every step draws new values; the two workers' samples differ.
    EXPECT_NE(one.a[0], one.a[1]);
    EXPECT_NE(one.a[1], one.a[2]);
    EXPECT_NE(first.a[0], second.a[0]);
    if (filler == "type: 'positive_unitball'") continue;  // b's one-value samples are 1
    EXPECT_NE(one.b[0], one.b[1]);
    // The two tops draw from their own streams.
    EXPECT_NE(std::vector<float>(one.a[0].begin(), one.a[0].begin() + 8), one.b[0]);
  }
}

TEST(DummyDataLayerTest, DrawsDependOnTheSeedAndTheStepOnly) {
  const std::string filler = "type: 'gaussian' std: 1";
  const Drawn run = Draw(filler, 4, 0, 1, 3);
  EXPECT_EQ(Draw(filler, 4, 0, 1, 3).a, run.a);            // deterministic under a fixed seed
  EXPECT_NE(Draw(filler, 4, 0, 1, 3, 7).a, run.a);         // another seed, other values
  const Drawn seeked = Draw(filler, 4, 0, 1, 1, 1701, 2);  // SeekToBatch(2): step 2's values
  EXPECT_EQ(seeked.a[0], run.a[2]);
  EXPECT_EQ(seeked.b[0], run.b[2]);
}

TEST(DummyDataLayerTest, ShapeDependentFillersUseTheWholeStepsShape) {
  // xavier FAN_OUT over the step's {8, 3, 2}: fan_out = 48 / 3 = 16, so the values
  // lie in [-sqrt(3/16), sqrt(3/16)] = [-0.433, 0.433] for one worker of 8 and
  // for each of two workers of 4 (whose own blob's fan_out would be 8: 0.612).
  const float bound = std::sqrt(3.f / 16.f);
  for (const Drawn& d : {Draw("type: 'xavier' variance_norm: FAN_OUT", 8, 0, 1, 4),
                         Draw("type: 'xavier' variance_norm: FAN_OUT", 4, 1, 2, 4)}) {
    float largest = 0;
    for (const auto& step : d.a) {
      for (float v : step) largest = std::max(largest, std::fabs(v));
    }
    EXPECT_LE(largest, bound);
    EXPECT_GT(largest, 0.8f * bound);  // 96+ draws reach near the bound
  }
  // positive_unitball: each sample sums to 1.
  const Drawn ball = Draw("type: 'positive_unitball'", 4, 1, 2, 1);
  for (int n = 0; n < 4; ++n) {
    double sum = 0;
    for (int j = 0; j < 6; ++j) sum += ball.a[0][n * 6 + j];
    EXPECT_NEAR(sum, 1.0, 1e-5) << "sample " << n;
  }
}

}  // namespace
}  // namespace pstrain

// Tests of worker/net: layer filtering by phase/stage/level, split insertion,
// in-place layers, weight sharing, learnable parameters, backward pruning,
// outputs, whole-net gradients (finite differences over the net's loss), and
// .caffemodel reading/writing and sharing.
#include "worker/net.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::BuildNet;
using testing::NetError;
using testing::ParamValues;

std::vector<std::string> LayerNames(const Net& net) {
  std::vector<std::string> names;
  for (const auto& layer : net.layers()) names.push_back(layer->name());
  return names;
}

int LayerIndex(const Net& net, const std::string& name) {
  for (size_t i = 0; i < net.layers().size(); ++i) {
    if (net.layers()[i]->name() == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no layer " << name;
  return 0;
}

// Sets an Input top to gaussian values, or to labels 0, 1, 2, 0, ... (mod k).
void Gaussian(Net& net, const std::string& blob, uint64_t seed) {
  BlobSet::FillGaussian(net.blob_by_name(blob), seed);
}
void Labels(Net& net, const std::string& blob, int k) {
  Blob* b = net.blob_by_name(blob);
  for (int64_t i = 0; i < b->count(); ++i) b->mutable_cpu_data()[i] = static_cast<float>(i % k);
}

constexpr const char* kRuleNet = R"(
  state { stage: "net_default" }
  layer { name: "always" type: "Input" top: "a0" input_param { shape { dim: 1 } } }
  layer { name: "train_only" type: "Input" top: "a1" include { phase: TRAIN }
          input_param { shape { dim: 1 } } }
  layer { name: "test_only" type: "Input" top: "a2" include { phase: TEST }
          input_param { shape { dim: 1 } } }
  layer { name: "not_test" type: "Input" top: "a3" exclude { phase: TEST }
          input_param { shape { dim: 1 } } }
  layer { name: "stages_a_and_b" type: "Input" top: "a4" include { stage: "a" stage: "b" }
          input_param { shape { dim: 1 } } }
  layer { name: "stage_a_or_b" type: "Input" top: "a5" include { stage: "a" } include { stage: "b" }
          input_param { shape { dim: 1 } } }
  layer { name: "not_stage_a" type: "Input" top: "a6" include { not_stage: "a" }
          input_param { shape { dim: 1 } } }
  layer { name: "level_ge_2" type: "Input" top: "a7" include { min_level: 2 }
          input_param { shape { dim: 1 } } }
  layer { name: "level_le_1" type: "Input" top: "a8" include { max_level: 1 }
          input_param { shape { dim: 1 } } }
  layer { name: "train_level_ge_1" type: "Input" top: "a9" include { phase: TRAIN min_level: 1 }
          input_param { shape { dim: 1 } } }
  layer { name: "default_stage" type: "Input" top: "a10" include { stage: "net_default" }
          input_param { shape { dim: 1 } } }
)";

std::vector<std::string> Kept(caffe::Phase phase, int level, std::vector<std::string> stages) {
  NetOptions options;
  options.state.set_phase(phase);
  if (level != 0) options.state.set_level(level);
  for (const auto& s : stages) options.state.add_stage(s);
  auto net = BuildNet(kRuleNet, options);
  return net ? LayerNames(*net) : std::vector<std::string>{};
}

TEST(NetTest, PhaseStageAndLevelRulesFilterLayers) {
  using V = std::vector<std::string>;
  // No stages given: the net's own state (stage "net_default") applies.
  EXPECT_EQ(Kept(caffe::TRAIN, 0, {}),
            (V{"always", "train_only", "not_test", "not_stage_a", "level_le_1", "default_stage"}));
  EXPECT_EQ(Kept(caffe::TEST, 2, {"a"}), (V{"always", "test_only", "stage_a_or_b", "level_ge_2"}));
  EXPECT_EQ(Kept(caffe::TRAIN, 1, {"b", "a"}),
            (V{"always", "train_only", "not_test", "stages_a_and_b", "stage_a_or_b", "level_le_1",
               "train_level_ge_1"}));
  EXPECT_EQ(Kept(caffe::TEST, 0, {"b"}),
            (V{"always", "test_only", "stage_a_or_b", "not_stage_a", "level_le_1"}));
}

// data feeds one InnerProduct whose output h feeds two more (and target two
// losses): splits must be inserted and the gradients of both consumers added.
constexpr const char* kSplitNet = R"(
  force_backward: true
  layer { name: "in" type: "Input" top: "data" top: "target"
          input_param { shape { dim: 3 dim: 4 } shape { dim: 3 dim: 2 } } }
  layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "h"
          inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 }
                                bias_filler { type: "gaussian" std: 0.5 } } }
  layer { name: "ipa" type: "InnerProduct" bottom: "h" top: "a"
          inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
  layer { name: "ipb" type: "InnerProduct" bottom: "h" top: "b"
          inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
  layer { name: "la" type: "EuclideanLoss" bottom: "a" bottom: "target" top: "la" }
  layer { name: "lb" type: "EuclideanLoss" bottom: "b" bottom: "target" top: "lb"
          loss_weight: 2 }
)";

TEST(NetTest, SplitsAreInsertedAndGradientsOfConsumersAdd) {
  auto net = BuildNet(kSplitNet);
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(LayerNames(*net),
            (std::vector<std::string>{"in", "target_in_1_split", "ip1", "h_ip1_0_split", "ipa",
                                      "ipb", "la", "lb"}));
  const auto& split = net->param().layer(3);
  EXPECT_EQ(split.type(), "Split");
  EXPECT_EQ(split.bottom(0), "h");
  EXPECT_EQ(net->param().layer(4).bottom(0), "h_ip1_0_split_0");
  EXPECT_EQ(net->param().layer(5).bottom(0), "h_ip1_0_split_1");
  Gaussian(*net, "data", 1);
  Gaussian(*net, "target", 2);
  testing::CheckNetGradient(*net, net->blob_by_name("data"), "data");
  testing::CheckNetGradient(*net, net->blob_by_name("target"), "target");
  testing::CheckNetGradient(*net, net->layer_by_name("ip1")->blobs()[0].get(), "ip1 weights");
  testing::CheckNetGradient(*net, net->layer_by_name("ip1")->blobs()[1].get(), "ip1 bias");
}

TEST(NetTest, InPlaceLayerWritesItsBottom) {
  auto net = BuildNet(R"(
    layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "h"
            inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 1 } } }
    layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
  )");
  ASSERT_NE(net, nullptr);
  const int relu = LayerIndex(*net, "relu");
  EXPECT_EQ(net->top_vecs()[relu][0], net->bottom_vecs()[relu][0]);
  EXPECT_EQ(net->top_vecs()[relu][0], net->blob_by_name("h"));
  Gaussian(*net, "data", 3);
  net->Forward();
  const float* w = net->layer_by_name("ip")->blobs()[0]->cpu_data();
  const float* x = net->blob_by_name("data")->cpu_data();
  const float* h = net->blob_by_name("h")->cpu_data();
  int negatives_clipped = 0;
  for (int n = 0; n < 2; ++n) {
    for (int o = 0; o < 4; ++o) {
      double pre = 0;  // the bias filler defaults to constant 0
      for (int k = 0; k < 3; ++k) pre += w[o * 3 + k] * x[n * 3 + k];
      EXPECT_NEAR(h[n * 4 + o], std::max(0.0, pre), 1e-5);
      negatives_clipped += pre < 0;
    }
  }
  EXPECT_GT(negatives_clipped, 0);  // the check saw ReLU at work
}

TEST(NetTest, LossTopAlsoConsumedByAnotherLayer) {
  auto net = BuildNet(R"(
    layer { name: "in" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 3 dim: 4 } shape { dim: 3 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "s"
            inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 1 } } }
    layer { name: "sl" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss"
            loss_weight: 1 }
    layer { name: "t" type: "TanH" bottom: "loss" top: "t" loss_weight: 0.5 }
  )");
  ASSERT_NE(net, nullptr);
  Gaussian(*net, "data", 4);
  Labels(*net, "label", 3);
  const double total = net->Forward();
  const double loss = net->blob_by_name("loss")->cpu_data()[0];
  EXPECT_GT(loss, 0.1);
  EXPECT_NEAR(total, loss + 0.5 * std::tanh(loss), 1e-5);
  testing::CheckNetGradient(*net, net->layer_by_name("ip")->blobs()[0].get(), "ip weights");
}

constexpr const char* kSharedNet = R"(
  layer { name: "in" type: "Input" top: "data" top: "target"
          input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 } } }
  layer { name: "ipa" type: "InnerProduct" bottom: "data" top: "a"
          param { name: "w" } param { name: "b" }
          inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.7 }
                                bias_filler { type: "gaussian" std: 0.7 } } }
  layer { name: "tanh" type: "TanH" bottom: "a" top: "a" }
  layer { name: "ipb" type: "InnerProduct" bottom: "a" top: "b"
          param { name: "w" } param { name: "b" }
          inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.7 }
                                bias_filler { type: "gaussian" std: 0.7 } } }
  layer { name: "loss" type: "EuclideanLoss" bottom: "b" bottom: "target" top: "loss" }
)";

TEST(NetTest, ParamsSharedByNameShareDataAndAddGradients) {
  auto net = BuildNet(kSharedNet);
  ASSERT_NE(net, nullptr);
  ASSERT_EQ(net->learnable_params().size(), 2u);
  EXPECT_EQ(net->learnable_params()[0].name, "w");
  EXPECT_EQ(net->learnable_params()[0].layer, "ipa");
  EXPECT_EQ(net->learnable_params()[1].name, "b");
  Layer* a = net->layer_by_name("ipa");
  Layer* b = net->layer_by_name("ipb");
  for (int j = 0; j < 2; ++j) {
    EXPECT_EQ(a->blobs()[j]->cpu_data(), b->blobs()[j]->cpu_data());
    EXPECT_EQ(a->blobs()[j]->cpu_diff(), b->blobs()[j]->cpu_diff());
  }
  Gaussian(*net, "data", 5);
  Gaussian(*net, "target", 6);
  // Perturbing the shared blob moves both layers, so the numeric gradient is
  // the sum of both uses: the analytic diff must hold that sum.
  testing::CheckNetGradient(*net, a->blobs()[0].get(), "shared w");
  testing::CheckNetGradient(*net, a->blobs()[1].get(), "shared b");
}

std::string ShareNet(const char* mode_a, int k_b) {
  return std::string(R"(
    layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 2 dim: 6 } } }
    layer { name: "ipa" type: "InnerProduct" bottom: "data" top: "a"
            param { name: "w" )") +
         mode_a + R"( } inner_product_param { num_output: 2 } }
    layer { name: "in2" type: "Input" top: "x" input_param { shape { dim: 2 dim: )" +
         std::to_string(k_b) + R"( } } }
    layer { name: "ipc" type: "InnerProduct" bottom: "x" top: "c"
            param { name: "w" )" +
         mode_a + R"( } inner_product_param { num_output: 6 } }
  )";
}

TEST(NetTest, SharedParamShapesMustMatchUnderStrict) {
  // ipa's weights are 2 x 6; ipc's 6 x 2 (same count) or 6 x 3.
  EXPECT_EQ(NetError(ShareNet("", 2)),
            "<net>: layer 'ipc' (InnerProduct): shared param 'w' has shape 6 2 (12) here but "
            "2 6 (12) in layer 'ipa'");
  EXPECT_NE(BuildNet(ShareNet("share_mode: PERMISSIVE", 2)), nullptr);
  EXPECT_EQ(NetError(ShareNet("share_mode: PERMISSIVE", 3)),
            "<net>: layer 'ipc' (InnerProduct): shared param 'w' has shape 6 3 (18) here but "
            "2 6 (12) in layer 'ipa'");
}

TEST(NetTest, LearnableParamsOrderAndMultipliers) {
  auto net = BuildNet(R"(
    layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
    layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "h1"
            param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
            inner_product_param { num_output: 2 } }
    layer { name: "ip2" type: "InnerProduct" bottom: "h1" top: "h2"
            inner_product_param { num_output: 2 } }
    layer { name: "ip3" type: "InnerProduct" bottom: "h2" top: "h3"
            param { lr_mult: 0 } param { lr_mult: 0 } inner_product_param { num_output: 2 } }
  )");
  ASSERT_NE(net, nullptr);
  const auto& params = net->learnable_params();
  ASSERT_EQ(params.size(), 6u);
  const std::vector<std::string> names = {"ip1/0", "ip1/1", "ip2/0", "ip2/1", "ip3/0", "ip3/1"};
  const std::vector<float> lr = {1, 2, 1, 1, 0, 0};
  const std::vector<float> decay = {1, 0, 1, 1, 1, 1};
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].name, names[i]);
    EXPECT_EQ(params[i].index, static_cast<int>(i % 2));
    EXPECT_EQ(params[i].lr_mult, lr[i]) << names[i];
    EXPECT_EQ(params[i].decay_mult, decay[i]) << names[i];
  }
  EXPECT_EQ(params[2].blob, net->layer_by_name("ip2")->blobs()[0].get());
  EXPECT_EQ(params[1].blob->shape(), (std::vector<int>{2}));
  EXPECT_FALSE(net->layer_by_name("ip3")->param_propagate_down(0));
  EXPECT_TRUE(net->layer_by_name("ip1")->param_propagate_down(1));
}

// Caffe's BatchNorm pins its statistics to lr_mult 0 when the prototxt gives no
// specs (or fewer than three), so no solver step, weight decay included, touches
// them and ps-worker keeps them local.
TEST(NetTest, BatchNormStatisticsNeverLearnWithoutSpecs) {
  for (const char* specs : {"", "param { lr_mult: 0 decay_mult: 0 }"}) {
    SCOPED_TRACE(specs);
    auto net = BuildNet(std::string(R"(
      layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
      layer { name: "bn" type: "BatchNorm" bottom: "data" top: "bn" )") +
                        specs + " }");
    ASSERT_NE(net, nullptr);
    const auto& params = net->learnable_params();
    ASSERT_EQ(params.size(), 3u);
    // Given specs go as Caffe's UpgradeNetBatchNorm drops them: decay_mult is
    // the default either way, and lr_mult 0 keeps it from mattering.
    for (const auto& p : params) {
      EXPECT_EQ(p.lr_mult, 0.f) << p.name;
      EXPECT_EQ(p.decay_mult, 1.f) << p.name;
    }
  }
}

constexpr const char* kPruneNet = R"(
  layer { name: "in" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
  layer { name: "ip_main" type: "InnerProduct" bottom: "data" top: "s"
          inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 1 } } }
  layer { name: "ip_side" type: "InnerProduct" bottom: "data" top: "side"
          inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 1 } } }
  layer { name: "ip_frozen" type: "InnerProduct" bottom: "data" top: "f"
          param { lr_mult: 0 } param { lr_mult: 0 }
          inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 1 } } }
  layer { name: "sum" type: "Eltwise" bottom: "s" bottom: "f" top: "sf" }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "sf" bottom: "label" top: "loss" }
)";

TEST(NetTest, BackwardSkipsLayersThatDoNotLeadToALoss) {
  auto net = BuildNet(kPruneNet);
  ASSERT_NE(net, nullptr);
  EXPECT_TRUE(net->layer_need_backward(LayerIndex(*net, "ip_main")));
  EXPECT_FALSE(net->layer_need_backward(LayerIndex(*net, "ip_side")));
  EXPECT_FALSE(net->layer_need_backward(LayerIndex(*net, "ip_frozen")));
  EXPECT_FALSE(net->layer_need_backward(LayerIndex(*net, "in")));
  const int loss = LayerIndex(*net, "loss");
  EXPECT_TRUE(net->layer_need_backward(loss));
  EXPECT_EQ(net->bottom_need_backward()[loss], (std::vector<bool>{true, false}));
  const int sum = LayerIndex(*net, "sum");
  EXPECT_EQ(net->bottom_need_backward()[sum], (std::vector<bool>{true, false}));

  Gaussian(*net, "data", 7);
  Labels(*net, "label", 3);
  net->ClearParamDiffs();
  net->ForwardBackward();
  const auto nonzero = [&](const char* layer) {
    const Blob& w = *net->layer_by_name(layer)->blobs()[0];
    int n = 0;
    for (int64_t i = 0; i < w.count(); ++i) n += w.cpu_diff()[i] != 0.f;
    return n;
  };
  EXPECT_GT(nonzero("ip_main"), 0);
  EXPECT_EQ(nonzero("ip_side"), 0);
  EXPECT_EQ(nonzero("ip_frozen"), 0);
}

TEST(NetTest, LabelsNeverGetGradientsEvenWithForceBackward) {
  auto net = BuildNet(std::string("force_backward: true\n") + kPruneNet);
  ASSERT_NE(net, nullptr);
  const int loss = LayerIndex(*net, "loss");
  EXPECT_EQ(net->bottom_need_backward()[loss], (std::vector<bool>{true, false}));
  EXPECT_TRUE(net->layer_need_backward(LayerIndex(*net, "ip_side")));
}

TEST(NetTest, OutputBlobNamesAreTheUnconsumedTops) {
  auto net = BuildNet(R"(
    layer { name: "in" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "s"
            inner_product_param { num_output: 3 } }
    layer { name: "ip_side" type: "InnerProduct" bottom: "data" top: "side"
            inner_product_param { num_output: 2 } }
    layer { name: "relu" type: "ReLU" bottom: "side" top: "side" }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
    layer { name: "accuracy" type: "Accuracy" bottom: "s" bottom: "label" top: "accuracy" }
  )");
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->output_blob_names(), (std::vector<std::string>{"side", "loss", "accuracy"}));
}

TEST(NetTest, LossLayerWithoutTopGetsAnAutomaticTop) {
  auto net = BuildNet(R"(
    layer { name: "in" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "s"
            inner_product_param { num_output: 3 } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" }
  )");
  ASSERT_NE(net, nullptr);
  Labels(*net, "label", 3);
  // Zero weights: uniform probabilities, loss ln 3 per sample (mean over 2).
  EXPECT_NEAR(net->Forward(), std::log(3.0), 1e-5);
  EXPECT_TRUE(net->layer_need_backward(LayerIndex(*net, "ip")));
}

constexpr const char* kMlp = R"(
  name: "mlp"
  layer { name: "in" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 4 dim: 5 } shape { dim: 4 } } }
  layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "h"
          inner_product_param { num_output: 6 weight_filler { type: "gaussian" std: 0.5 }
                                bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
  layer { name: "tanh" type: "TanH" bottom: "h" top: "h" }
  layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "s"
          inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 }
                                bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
)";

TEST(NetTest, WholeMlpGradientMatchesFiniteDifferences) {
  for (Engine engine : {Engine::kReference, Engine::kFast}) {
    SCOPED_TRACE(engine == Engine::kFast ? "fast" : "reference");
    NetOptions options;
    options.context.engine = engine;
    auto net = BuildNet(kMlp, options);
    ASSERT_NE(net, nullptr);
    Gaussian(*net, "data", 8);
    Labels(*net, "label", 3);
    ASSERT_EQ(net->learnable_params().size(), 4u);
    for (const auto& p : net->learnable_params()) {
      testing::CheckNetGradient(*net, p.blob, p.name);
    }
  }
}

// The MLP with other seeds, or with some layers renamed or resized.
std::unique_ptr<Net> Mlp(uint64_t seed, const std::string& from = "", const std::string& to = "") {
  std::string text = kMlp;
  if (!from.empty()) text.replace(text.find(from), from.size(), to);
  NetOptions options;
  options.context.seed = seed;
  return BuildNet(text, options);
}

bool SameParams(const std::vector<std::vector<float>>& a,
                const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

TEST(NetTest, CaffemodelRoundTripIsBitIdentical) {
  testing::TempDir dir;
  auto a = Mlp(1);
  auto b = Mlp(2);
  ASSERT_TRUE(a && b);
  ASSERT_FALSE(SameParams(ParamValues(*a), ParamValues(*b)));
  const std::string path = dir / "mlp.caffemodel";
  ASSERT_TRUE(a->WriteCaffemodel(path).ok());
  caffe::NetParameter proto;
  a->ToProto(&proto);
  ASSERT_EQ(proto.layer_size(), 5);
  EXPECT_EQ(proto.name(), "mlp");
  EXPECT_EQ(proto.layer(1).blobs(0).shape().dim_size(), 2);
  EXPECT_EQ(proto.layer(1).blobs(0).shape().dim(0), 6);
  EXPECT_EQ(proto.layer(1).blobs(0).shape().dim(1), 5);
  Status s = b->CopyTrainedLayersFromFile(path);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(SameParams(ParamValues(*a), ParamValues(*b)));
}

TEST(NetTest, CopyByLayerNameIntoANetSharingSomeNames) {
  testing::TempDir dir;
  auto a = Mlp(1);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->WriteCaffemodel(dir / "mlp.caffemodel").ok());
  // "ip2" renamed: only ip1 comes from the file.
  auto c = Mlp(3, "name: \"ip2\"", "name: \"ip_other\"");
  ASSERT_NE(c, nullptr);
  const auto before = ParamValues(*c);
  ASSERT_TRUE(c->CopyTrainedLayersFromFile(dir / "mlp.caffemodel").ok());
  const auto after = ParamValues(*c);
  const auto from_a = ParamValues(*a);
  EXPECT_TRUE(SameParams({after[0], after[1]}, {from_a[0], from_a[1]}));
  EXPECT_TRUE(SameParams({after[2], after[3]}, {before[2], before[3]}));
}

TEST(NetTest, CaffemodelShapeMismatchNamesLayerAndChangesNothing) {
  testing::TempDir dir;
  auto a = Mlp(1);
  ASSERT_NE(a, nullptr);
  const std::string path = dir / "mlp.caffemodel";
  ASSERT_TRUE(a->WriteCaffemodel(path).ok());
  auto d = Mlp(4, "num_output: 3", "num_output: 4");  // ip2 is 4 x 6 here
  ASSERT_NE(d, nullptr);
  const auto before = ParamValues(*d);
  Status s = d->CopyTrainedLayersFromFile(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), path +
                             ": layer 'ip2' blob 0: shape mismatch: the file has 3 6 (18), "
                             "the net has 4 6 (24)");
  EXPECT_TRUE(SameParams(ParamValues(*d), before));  // ip1 (earlier, matching) untouched too
}

TEST(NetTest, TruncatedCaffemodelIsRejectedAndChangesNothing) {
  testing::TempDir dir;
  auto a = Mlp(1);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->WriteCaffemodel(dir / "full.caffemodel").ok());
  const std::string bytes = testing::ReadWholeFile(dir / "full.caffemodel");
  ASSERT_GT(bytes.size(), 100u);
  const std::string path = dir / "half.caffemodel";
  testing::WriteFile(path, bytes.substr(0, bytes.size() / 2), false);
  auto b = Mlp(2);
  ASSERT_NE(b, nullptr);
  const auto before = ParamValues(*b);
  Status s = b->CopyTrainedLayersFromFile(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), path + ": not a valid binary caffe.NetParameter (truncated or corrupt)");
  EXPECT_TRUE(SameParams(ParamValues(*b), before));
}

TEST(NetTest, ShareTrainedLayersWithSharesStorage) {
  auto train = Mlp(1);
  NetOptions options;
  options.state.set_phase(caffe::TEST);
  options.context.seed = 2;
  auto test = BuildNet(kMlp, options);
  ASSERT_TRUE(train && test);
  ASSERT_TRUE(test->ShareTrainedLayersWith(*train).ok());
  EXPECT_TRUE(SameParams(ParamValues(*train), ParamValues(*test)));
  train->layer_by_name("ip2")->blobs()[1]->mutable_cpu_data()[0] = 42.f;
  EXPECT_EQ(test->layer_by_name("ip2")->blobs()[1]->cpu_data()[0], 42.f);

  auto other = Mlp(3, "num_output: 3", "num_output: 4");
  ASSERT_NE(other, nullptr);
  Status s = other->ShareTrainedLayersWith(*train);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "layer 'ip2' blob 0 has shape 4 6 (24) in one net and 3 6 (18) in the "
            "other");
}

TEST(NetTest, V1NetFileBuildsThroughTheUpgrade) {
  testing::TempDir dir;
  const std::string path = dir / "v1.prototxt";
  testing::WriteTextFile(path, R"(name: "v1"
input: "data"
input_dim: 2 input_dim: 3 input_dim: 1 input_dim: 1
layers { name: "ip" type: INNER_PRODUCT bottom: "data" top: "ip"
         blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
         inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 1 } } }
layers { name: "relu" type: RELU bottom: "ip" top: "ip" }
layers { name: "prob" type: SOFTMAX bottom: "ip" top: "prob" }
)");
  auto net = Net::FromFile(path, NetOptions());
  ASSERT_TRUE(net.ok()) << net.status().message();
  Net& n = *net.value();
  EXPECT_EQ(LayerNames(n), (std::vector<std::string>{"input", "ip", "relu", "prob"}));
  EXPECT_EQ(std::string(n.layers()[1]->type()), "InnerProduct");
  EXPECT_EQ(n.blob_by_name("data")->shape(), (std::vector<int>{2, 3, 1, 1}));
  EXPECT_EQ(n.blob_by_name("prob")->shape(), (std::vector<int>{2, 4}));
  EXPECT_EQ(n.learnable_params()[1].lr_mult, 2.f);
  EXPECT_EQ(n.learnable_params()[1].decay_mult, 0.f);
  EXPECT_EQ(n.output_blob_names(), (std::vector<std::string>{"prob"}));
  BlobSet::FillGaussian(n.blob_by_name("data"), 9);
  n.Forward();
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int j = 0; j < 4; ++j) sum += n.blob_by_name("prob")->cpu_data()[r * 4 + j];
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(NetTest, InputDimDeployNetBuilds) {
  auto net = BuildNet(R"(
    name: "deploy"
    input: "data"
    input_dim: 1 input_dim: 3 input_dim: 2 input_dim: 2
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
            inner_product_param { num_output: 2 } }
    layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
  )");
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(LayerNames(*net), (std::vector<std::string>{"input", "ip", "prob"}));
  EXPECT_EQ(net->blob_by_name("data")->shape(), (std::vector<int>{1, 3, 2, 2}));
  EXPECT_EQ(net->Forward(), 0.f);
  EXPECT_FLOAT_EQ(net->blob_by_name("prob")->cpu_data()[0], 0.5f);  // zero weights
}

}  // namespace
}  // namespace pstrain

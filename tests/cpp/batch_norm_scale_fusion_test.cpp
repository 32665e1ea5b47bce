// BatchNorm fused with the Scale (and a ReLU) after it (Net::FuseLayers,
// batch_norm_layer.hpp): which layers are fused, and that a fused net
// computes what the layers apart compute (the reference engine): loss,
// activations, running statistics, every parameter's gradient and the
// input's gradient over several SGD steps, with batch and with global
// statistics, with and without the Scale's bias and a (leaky) ReLU, with
// frozen Scale parameters, with accumulated gradients, on every CPU kernel
// variant the machine runs; the fused pair's gradients against finite
// differences; ResNet-50's 53 pairs and 33 ReLUs. The GPU engine's fused
// kernels against the CPU reference (skipped without a device). Every net
// compared fused reports each fused layer, the ReLU included, as "fused"
// ("gpu-fused" on the GPU engine): a layer left apart gives the same answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/rng.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/layers/cpu_kernel_isa.hpp"
#include "worker/net.hpp"
#include "worker/net_timer.hpp"

namespace pstrain::testing {
namespace {

constexpr float kTolerance = 1e-4f;

// Conv -> BatchNorm -> Scale (both in place) [-> `after`] -> InnerProduct ->
// loss; `scale` is the Scale layer's parameter text, `after` layers on 'c'.
std::string NetText(const std::string& scale, const std::string& after = "") {
  const std::string head = "force_backward: true";
  return "name: 'fuse' " + head + R"(
layer { name: 'data' type: 'Input' top: 'x' top: 't'
        input_param { shape { dim: 4 dim: 3 dim: 6 dim: 5 } shape { dim: 4 dim: 5 } } }
layer { name: 'conv' type: 'Convolution' bottom: 'x' top: 'c'
        convolution_param { num_output: 6 kernel_size: 3 pad: 1 bias_term: false
                            weight_filler { type: 'gaussian' std: 0.3 } } }
layer { name: 'bn' type: 'BatchNorm' bottom: 'c' top: 'c'
        batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: 'scale' type: 'Scale' bottom: 'c' top: 'c' )" +
         scale + " }\n" + after + R"(
layer { name: 'ip' type: 'InnerProduct' bottom: 'c' top: 'y'
        inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.2 } } }
layer { name: 'loss' type: 'EuclideanLoss' bottom: 'y' bottom: 't' top: 'loss' }
)";
}

constexpr char kScaleWithBias[] =
    "scale_param { bias_term: true filler { type: 'gaussian' std: 0.5 } "
    "bias_filler { type: 'gaussian' std: 0.3 } }";
constexpr char kScaleWithoutBias[] = "scale_param { filler { type: 'gaussian' std: 0.5 } }";

std::unique_ptr<Net> Build(const std::string& text, Engine engine, bool fuse,
                           caffe::Phase phase = caffe::TRAIN) {
  NetOptions options;
  options.context.engine = engine;
  options.fuse_layers = fuse;
  options.state.set_phase(phase);
  return BuildNet(text, options);
}

void FillInputs(Net& net, uint64_t seed) {
  BlobSet::FillGaussian(net.blob_by_name("x"), seed, 1.f);
  BlobSet::FillGaussian(net.blob_by_name("t"), seed + 1, 1.f);
  // The mean stays away from 0 so that subtracting it matters.
  float* x = net.blob_by_name("x")->mutable_cpu_data();
  for (int64_t i = 0; i < net.blob_by_name("x")->count(); ++i) x[i] += 0.7f;
}

void CopyWeights(const Net& from, Net& to) {
  caffe::NetParameter weights;
  from.ToProto(&weights);
  ASSERT_TRUE(to.CopyTrainedLayersFrom(weights, "the reference net").ok());
}

void ExpectVectorsNear(const std::vector<float>& a, const std::vector<float>& b,
                       const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ExpectBlobsNear(a.data(), b.data(), static_cast<int64_t>(a.size()), kTolerance, what);
}

// A gradient arrived: every value finite, and at least a quarter of them
// non-zero (two all-zero diffs would compare equal).
void ExpectAGradient(const std::vector<float>& diff, const std::string& what) {
  ASSERT_FALSE(diff.empty()) << what;
  size_t non_zero = 0;
  for (size_t i = 0; i < diff.size(); ++i) {
    ASSERT_TRUE(std::isfinite(diff[i])) << what << " [" << i << "] = " << diff[i];
    non_zero += diff[i] != 0.f;
  }
  EXPECT_GE(4 * non_zero, diff.size())
      << what << ": " << non_zero << " of " << diff.size() << " values non-zero";
}

std::vector<float> Data(const Blob& blob) {
  return std::vector<float>(blob.cpu_data(), blob.cpu_data() + blob.count());
}
std::vector<float> Diff(const Blob& blob) {
  return std::vector<float>(blob.cpu_diff(), blob.cpu_diff() + blob.count());
}

// Every learnable blob (data and diff), every top's data and the input's
// gradient of `net` against `expected`.
void ExpectSameNets(const Net& expected, const Net& net, const std::string& when) {
  for (const auto& layer : expected.param().layer()) {  // every top, in place ones last
    for (const std::string& name : layer.top()) {
      ExpectVectorsNear(Data(*expected.blob_by_name(name)), Data(*net.blob_by_name(name)),
                        when + ": data of " + name);
    }
  }
  ExpectVectorsNear(Diff(*expected.blob_by_name("x")), Diff(*net.blob_by_name("x")),
                    when + ": diff of x");
  const auto& e = expected.learnable_params();
  const auto& p = net.learnable_params();
  ASSERT_EQ(e.size(), p.size());
  for (size_t i = 0; i < e.size(); ++i) {
    ExpectVectorsNear(Data(*e[i].blob), Data(*p[i].blob), when + ": data of " + e[i].name);
    ExpectVectorsNear(Diff(*e[i].blob), Diff(*p[i].blob), when + ": diff of " + e[i].name);
  }
}

// What a fused layer reports it runs under `engine`.
std::string FusedName(Engine engine) { return engine == Engine::kGpu ? "gpu-fused" : "fused"; }

// Every BatchNorm, Scale, ReLU and Eltwise of `net` (a net of this file built
// with fusion, where each of them is fused) reports FusedName(engine), the
// ReLU too: a layer left apart would still compute the same answers, so the
// comparisons with the reference alone cannot tell.
void ExpectEveryLayerFused(const Net& net, Engine engine) {
  int checked = 0;
  for (const auto& layer : net.layers()) {
    if (!layer->Is("BatchNorm") && !layer->Is("Scale") && !layer->Is("ReLU") &&
        !layer->Is("Eltwise")) {
      continue;
    }
    EXPECT_EQ(layer->Implementation(), FusedName(engine))
        << layer->type() << " '" << layer->name() << "'";
    ++checked;
  }
  EXPECT_GE(checked, 2) << "no fused group in the net";
}

// Three SGD steps (the last accumulating two forward-backward passes, as
// iter_size 2 does) on `net` and on the reference engine's net, from the
// same weights and inputs, compared after every pass. With `fuse`, first
// ExpectEveryLayerFused.
// `expected_engine`: the reference engine, or the fast one apart where the
// convolutions' own differences between engines would hide the fused layers'.
void ExpectTrainsAsReference(const std::string& text, Engine engine, bool fuse,
                             Engine expected_engine = Engine::kReference) {
  auto reference = Build(text, expected_engine, false);
  auto net = Build(text, engine, fuse);
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(net, nullptr);
  if (fuse) ExpectEveryLayerFused(*net, engine);
  CopyWeights(*reference, *net);
  for (int step = 0; step < 3; ++step) {
    reference->ClearParamDiffs();
    net->ClearParamDiffs();
    for (int pass = 0; pass < (step == 2 ? 2 : 1); ++pass) {
      const std::string when = "step " + std::to_string(step) + " pass " + std::to_string(pass);
      FillInputs(*reference, 100 + 10 * step + pass);
      FillInputs(*net, 100 + 10 * step + pass);
      const float expected_loss = reference->ForwardBackward();
      const float loss = net->ForwardBackward();
      EXPECT_NEAR(loss, expected_loss, kTolerance * std::max(1.f, std::abs(expected_loss))) << when;
      ExpectSameNets(*reference, *net, when);
    }
    for (Net* n : {reference.get(), net.get()}) {
      for (const LearnableParam& p : n->learnable_params()) {
        float* data = p.blob->mutable_cpu_data();
        const float* diff = p.blob->cpu_diff();
        for (int64_t i = 0; i < p.blob->count(); ++i) data[i] -= 0.05f * p.lr_mult * diff[i];
      }
    }
  }
}

TEST(BatchNormScaleFusionTest, FusesUnderTheFastEngineOnly) {
  const std::string text = NetText(kScaleWithBias);
  auto fused = Build(text, Engine::kFast, true);
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->layer_by_name("bn")->Implementation(), "fused");
  EXPECT_EQ(fused->layer_by_name("scale")->Implementation(), "fused");
  EXPECT_EQ(fused->layer_by_name("bn")->CpuImplementations(), std::vector<std::string>{"fused"});
  EXPECT_FALSE(fused->layer_by_name("bn")->SelectCpuImplementation("reference").ok());

  auto apart = Build(text, Engine::kFast, false);
  ASSERT_NE(apart, nullptr);
  EXPECT_EQ(apart->layer_by_name("bn")->Implementation(), "fast");
  EXPECT_EQ(apart->layer_by_name("scale")->Implementation(), "reference");

  auto reference = Build(text, Engine::kReference, true);
  ASSERT_NE(reference, nullptr);
  EXPECT_EQ(reference->layer_by_name("bn")->Implementation(), "reference");

  ASSERT_EQ(setenv("PSTRAIN_FUSE_LAYERS", "0", 1), 0);
  auto off = Build(text, Engine::kFast, true);
  unsetenv("PSTRAIN_FUSE_LAYERS");
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(off->layer_by_name("bn")->Implementation(), "fast");
}

TEST(BatchNormScaleFusionTest, PairsThatStayApart) {
  const std::string conv = R"(name: 'apart' force_backward: true
layer { name: 'data' type: 'Input' top: 'x' top: 'w'
        input_param { shape { dim: 2 dim: 6 dim: 6 dim: 5 } shape { dim: 6 } } }
)";
  const std::string bn = "layer { name: 'bn' type: 'BatchNorm' bottom: 'x' top: 'x' }\n";
  struct Case {
    const char* what;
    std::string layers;
  };
  const std::vector<Case> cases = {
      {"a Scale with its own top",
       bn + "layer { name: 'scale' type: 'Scale' bottom: 'x' top: 's' scale_param { bias_term: "
            "true } }"},
      {"a Scale taking its scale from a bottom",
       bn + "layer { name: 'scale' type: 'Scale' bottom: 'x' bottom: 'w' top: 'x' }"},
      {"a Scale along axis 2 (also 6 long)",
       bn + "layer { name: 'scale' type: 'Scale' bottom: 'x' top: 'x' scale_param { axis: 2 } }"},
      {"a layer between them", bn + "layer { name: 'relu' type: 'ReLU' bottom: 'x' top: 'x' }\n"
                                    "layer { name: 'scale' type: 'Scale' bottom: 'x' top: 'x' }"},
      // (A BatchNorm top with a loss weight, or read by another layer too,
      // goes through a Split, so no Scale can work on it in place.)
  };
  for (const Case& c : cases) {
    auto net = Build(conv + c.layers, Engine::kFast, true);
    ASSERT_NE(net, nullptr) << c.what;
    EXPECT_NE(net->layer_by_name("bn")->Implementation(), "fused") << c.what;
    EXPECT_NE(net->layer_by_name("scale")->Implementation(), "fused") << c.what;
  }
}

// On every kernel variant this CPU runs (generic, AVX2, AVX-512).
void ExpectTrainsAsReferenceOnEveryIsa(const std::string& text) {
  const CpuIsa saved = KernelIsa();
  for (CpuIsa isa : {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (static_cast<int>(isa) > static_cast<int>(SupportedCpuIsa())) continue;
    SCOPED_TRACE(CpuIsaName(isa));
    OverrideKernelIsa(isa);
    ExpectTrainsAsReference(text, Engine::kFast, true);
    EXPECT_EQ(LastKernelIsa(), isa);
  }
  OverrideKernelIsa(saved);
}

TEST(BatchNormScaleFusionTest, TrainsAsTheReferenceWithBias) {
  ExpectTrainsAsReferenceOnEveryIsa(NetText(kScaleWithBias));
}

TEST(BatchNormScaleFusionTest, TrainsAsTheReferenceWithoutBias) {
  ExpectTrainsAsReferenceOnEveryIsa(NetText(kScaleWithoutBias));
}

constexpr char kRelu[] = "layer { name: 'relu' type: 'ReLU' bottom: 'c' top: 'c' }";
constexpr char kLeakyRelu[] =
    "layer { name: 'relu' type: 'ReLU' bottom: 'c' top: 'c' relu_param { negative_slope: 0.1 } }";

TEST(BatchNormScaleFusionTest, TakesOverTheReluInPlaceAfterTheScale) {
  auto net = Build(NetText(kScaleWithBias, kRelu), Engine::kFast, true);
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->layer_by_name("relu")->Implementation(), "fused");
  // A ReLU with its own top stays apart; the BatchNorm and Scale are fused still.
  auto apart = Build(NetText(kScaleWithBias,
                             "layer { name: 'relu' type: 'ReLU' bottom: 'c' top: 'r' }\n"
                             "layer { name: 'sum' type: 'Eltwise' bottom: 'c' bottom: 'r' "
                             "top: 'c2' }"),
                     Engine::kFast, true);
  ASSERT_NE(apart, nullptr);
  EXPECT_EQ(apart->layer_by_name("relu")->Implementation(), "reference");
  EXPECT_EQ(apart->layer_by_name("bn")->Implementation(), "fused");
}

TEST(BatchNormScaleFusionTest, TrainsAsTheReferenceWithRelu) {
  ExpectTrainsAsReferenceOnEveryIsa(NetText(kScaleWithBias, kRelu));
  ExpectTrainsAsReferenceOnEveryIsa(NetText(kScaleWithoutBias, kLeakyRelu));
}

TEST(BatchNormScaleFusionTest, FrozenScaleStillPassesTheGradientDown) {
  const std::string text =
      NetText(std::string("param { lr_mult: 0 } param { lr_mult: 0 } ") + kScaleWithBias);
  auto net = Build(text, Engine::kFast, true);
  ASSERT_NE(net, nullptr);
  ASSERT_EQ(net->layer_by_name("scale")->Implementation(), "fused");
  ExpectTrainsAsReference(text, Engine::kFast, true);
  FillInputs(*net, 7);
  net->ClearParamDiffs();
  net->ForwardBackward();
  for (int p = 0; p < 2; ++p) {
    const Blob& blob = *net->layer_by_name("scale")->blobs()[p];
    for (float d : Diff(blob)) ASSERT_EQ(d, 0.f) << "scale param " << p;
  }
}

// A BatchNorm on the net's input (not in place): the Scale's gradients, and
// no gradient into the input's diff (which holds 7s).
void ExpectOnTheInputOnlyScaleGradients(Engine engine) {
  const std::string text = R"(name: 'input_bn'
layer { name: 'data' type: 'Input' top: 'x' top: 't'
        input_param { shape { dim: 4 dim: 3 dim: 6 dim: 5 } shape { dim: 4 dim: 5 } } }
layer { name: 'bn' type: 'BatchNorm' bottom: 'x' top: 'n' }
layer { name: 'scale' type: 'Scale' bottom: 'n' top: 'n' )" +
                           std::string(kScaleWithBias) + R"( }
layer { name: 'ip' type: 'InnerProduct' bottom: 'n' top: 'y'
        inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.2 } } }
layer { name: 'loss' type: 'EuclideanLoss' bottom: 'y' bottom: 't' top: 'loss' }
)";
  auto reference = Build(text, Engine::kReference, false);
  auto net = Build(text, engine, true);
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(net, nullptr);
  ExpectEveryLayerFused(*net, engine);
  CopyWeights(*reference, *net);
  for (Net* n : {reference.get(), net.get()}) {
    FillInputs(*n, 3);
    Blob* x = n->blob_by_name("x");
    for (int64_t i = 0; i < x->count(); ++i) x->mutable_cpu_diff()[i] = 7.f;
    n->ClearParamDiffs();
    n->ForwardBackward();
    for (float d : Diff(*x)) ASSERT_EQ(d, 7.f) << "the input's diff was written";
  }
  for (int p = 0; p < 2; ++p) {
    ExpectVectorsNear(Diff(*reference->layer_by_name("scale")->blobs()[p]),
                      Diff(*net->layer_by_name("scale")->blobs()[p]),
                      "scale param " + std::to_string(p));
  }
}

TEST(BatchNormScaleFusionTest, OnTheInputWritesOnlyTheScaleGradients) {
  ExpectOnTheInputOnlyScaleGradients(Engine::kFast);
}

// A TEST-phase net (the stored statistics) from trained weights, fused and not.
void ExpectGlobalStatisticsMatch(const std::string& text, Engine engine) {
  auto trained = Build(text, Engine::kReference, false);
  ASSERT_NE(trained, nullptr);
  for (int pass = 0; pass < 3; ++pass) {  // running statistics away from 0
    FillInputs(*trained, 40 + pass);
    trained->Forward();
  }
  auto reference = Build(text, Engine::kReference, false, caffe::TEST);
  auto net = Build(text, engine, true, caffe::TEST);
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(net, nullptr);
  ExpectEveryLayerFused(*net, engine);
  CopyWeights(*trained, *reference);
  CopyWeights(*trained, *net);
  for (Net* n : {reference.get(), net.get()}) {
    FillInputs(*n, 50);
    n->ClearParamDiffs();
    n->ForwardBackward();
  }
  ExpectSameNets(*reference, *net, "TEST phase");
}

TEST(BatchNormScaleFusionTest, GlobalStatisticsMatchTheReference) {
  for (const char* after : {"", kLeakyRelu}) {
    SCOPED_TRACE(after);
    ExpectGlobalStatisticsMatch(NetText(kScaleWithBias, after), Engine::kFast);
  }
}

TEST(BatchNormScaleFusionTest, GradientsAgainstFiniteDifferences) {
  for (const char* scale : {kScaleWithBias, kScaleWithoutBias}) {
    auto net = Build(NetText(scale), Engine::kFast, true);
    ASSERT_NE(net, nullptr);
    ASSERT_EQ(net->layer_by_name("bn")->Implementation(), "fused");
    FillInputs(*net, 9);
    CheckNetGradient(*net, net->blob_by_name("x"), std::string("x, ") + scale);
    for (const auto& blob : net->layer_by_name("scale")->blobs()) {
      CheckNetGradient(*net, blob.get(), std::string("scale blob, ") + scale);
    }
    CheckNetGradient(*net, net->layer_by_name("conv")->blobs()[0].get(),
                     std::string("conv weights, ") + scale);
  }
}

// The BatchNorm with a top of its own ('n'), the Scale and a leaky ReLU in
// place on it: the BatchNorm's bottom diff goes to another blob than its top's.
std::string BatchNormApartText() {
  return std::string(R"(name: 'bn_apart' force_backward: true
layer { name: 'data' type: 'Input' top: 'x' top: 't'
        input_param { shape { dim: 4 dim: 3 dim: 6 dim: 5 } shape { dim: 4 dim: 5 } } }
layer { name: 'conv' type: 'Convolution' bottom: 'x' top: 'c'
        convolution_param { num_output: 6 kernel_size: 3 pad: 1 bias_term: false
                            weight_filler { type: 'gaussian' std: 0.3 } } }
layer { name: 'bn' type: 'BatchNorm' bottom: 'c' top: 'n' }
layer { name: 'scale' type: 'Scale' bottom: 'n' top: 'n' )") +
         kScaleWithBias + R"( }
layer { name: 'relu' type: 'ReLU' bottom: 'n' top: 'n' relu_param { negative_slope: 0.1 } }
layer { name: 'ip' type: 'InnerProduct' bottom: 'n' top: 'y'
        inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.2 } } }
layer { name: 'loss' type: 'EuclideanLoss' bottom: 'y' bottom: 't' top: 'loss' }
)";
}

TEST(BatchNormScaleFusionTest, BatchNormWithATopOfItsOwn) {
  auto net = Build(BatchNormApartText(), Engine::kFast, true);
  ASSERT_NE(net, nullptr);
  ASSERT_EQ(net->layer_by_name("relu")->Implementation(), "fused");
  ExpectTrainsAsReference(BatchNormApartText(), Engine::kFast, true);
  // (The diff of 'n' itself, an intermediate gradient, is not compared: the
  // fused backward does not write it.)
}

// `ps-net time` (TimeNet) drives every layer's Backward itself on a net
// without a loss, asking each for the gradients a training would want; the
// fused layers must give the layers' answers, the bottom diff included.
// `text` without force_backward and without its loss layer, built on the
// reference engine and fused on the fast one (`fused`: a layer that must be),
// with the same weights and inputs, after TimeNet ran both with the same
// gradient arriving at 'y' (4 x 5).
struct TimedNets {
  std::unique_ptr<Net> reference, net;
};
TimedNets TimeWithoutALoss(std::string text, const char* fused, uint64_t seed) {
  text.replace(text.find("force_backward: true"), 20, "");
  text = text.substr(0, text.find("layer { name: 'loss'"));
  TimedNets t{Build(text, Engine::kReference, false), Build(text, Engine::kFast, true)};
  EXPECT_TRUE(t.reference != nullptr && t.net != nullptr);
  if (t.reference == nullptr || t.net == nullptr) return {};
  EXPECT_TRUE(t.net->layer_by_name(fused)->fused()) << fused;
  CopyWeights(*t.reference, *t.net);
  BlobSet arriving;
  BlobSet::FillGaussian(arriving.Add({4, 5}), seed, 1.f);
  for (Net* n : {t.reference.get(), t.net.get()}) {
    FillInputs(*n, seed + 1);
    Blob* y = n->blob_by_name("y");
    std::copy(arriving[0]->cpu_data(), arriving[0]->cpu_data() + y->count(), y->mutable_cpu_diff());
    n->ClearParamDiffs();
    TimeNet(*n, 1);  // two forward and backward passes (one warm-up)
  }
  return t;
}

TEST(BatchNormScaleFusionTest, TimedWithoutALossAsTheLayersApart) {
  TimedNets t = TimeWithoutALoss(NetText(kScaleWithBias, kLeakyRelu), "scale", 22);
  ASSERT_NE(t.net, nullptr);
  Net* reference = t.reference.get();
  Net* net = t.net.get();
  ExpectAGradient(Diff(*net->blob_by_name("c")), "the BatchNorm's bottom diff");
  ExpectVectorsNear(Diff(*reference->blob_by_name("c")), Diff(*net->blob_by_name("c")),
                    "the BatchNorm's bottom diff");
  for (const char* layer : {"conv", "scale"}) {
    for (size_t p = 0; p < reference->layer_by_name(layer)->blobs().size(); ++p) {
      ExpectAGradient(Diff(*net->layer_by_name(layer)->blobs()[p]),
                      std::string(layer) + " param " + std::to_string(p));
      ExpectVectorsNear(Diff(*reference->layer_by_name(layer)->blobs()[p]),
                        Diff(*net->layer_by_name(layer)->blobs()[p]),
                        std::string(layer) + " param " + std::to_string(p));
    }
  }
  float largest = 0.f;
  for (float d : Diff(*net->blob_by_name("c"))) largest = std::max(largest, std::abs(d));
  EXPECT_GT(largest, 1e-3f) << "no gradient reached the BatchNorm's bottom";
}

// Engine auto times only layers with a choice: the fused ones have none.
TEST(BatchNormScaleFusionTest, EngineAutoLeavesTheFusedLayersFused) {
  NetOptions options;
  options.context.engine = Engine::kFast;
  options.autotune.enabled = true;
  auto net = BuildNet(NetText(kScaleWithBias, kRelu), options);
  ASSERT_NE(net, nullptr);
  for (const ImplementationChoice& choice : net->implementation_choices()) {
    EXPECT_TRUE(choice.type != "BatchNorm" && choice.type != "Scale" && choice.type != "ReLU")
        << choice.Describe();
  }
  for (const char* layer : {"bn", "scale", "relu"}) {
    EXPECT_EQ(net->layer_by_name(layer)->Implementation(), "fused") << layer;
  }
}

// A residual sum: two convolutions of x, an Eltwise SUM of them (`sum`: its
// parameter text and bottoms), then `after` on 's', an InnerProduct, a loss.
std::string ResidualText(const std::string& sum, const std::string& after) {
  return R"(name: 'residual' force_backward: true
layer { name: 'data' type: 'Input' top: 'x' top: 't'
        input_param { shape { dim: 4 dim: 3 dim: 6 dim: 5 } shape { dim: 4 dim: 5 } } }
layer { name: 'a' type: 'Convolution' bottom: 'x' top: 'a'
        convolution_param { num_output: 4 kernel_size: 3 pad: 1
                            weight_filler { type: 'gaussian' std: 0.3 } } }
layer { name: 'b' type: 'Convolution' bottom: 'x' top: 'b'
        convolution_param { num_output: 4 kernel_size: 1
                            weight_filler { type: 'gaussian' std: 0.3 } } }
layer { name: 'sum' type: 'Eltwise' top: 's' )" +
         sum + " }\n" + after + R"(
layer { name: 'ip' type: 'InnerProduct' bottom: 's' top: 'y'
        inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.2 } } }
layer { name: 'loss' type: 'EuclideanLoss' bottom: 'y' bottom: 't' top: 'loss' }
)";
}

constexpr char kSumRelu[] = "layer { name: 'relu' type: 'ReLU' bottom: 's' top: 's' }";

TEST(EltwiseReluFusionTest, ASumTakesOverTheReluOnItsTopUnderTheFastEngine) {
  auto net = Build(ResidualText("bottom: 'a' bottom: 'b'", kSumRelu), Engine::kFast, true);
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->layer_by_name("sum")->Implementation(), "fused");
  EXPECT_EQ(net->layer_by_name("relu")->Implementation(), "fused");
  const std::vector<std::string> apart = {
      // PROD and MAX keep their ReLU; so does a ReLU with its own top.
      ResidualText("bottom: 'a' bottom: 'b' eltwise_param { operation: PROD }", kSumRelu),
      ResidualText("bottom: 'a' bottom: 'b' eltwise_param { operation: MAX }", kSumRelu),
      ResidualText("bottom: 'a' bottom: 'b'",
                   "layer { name: 'relu' type: 'ReLU' bottom: 's' top: 'r' }\n"
                   "layer { name: 'keep' type: 'Eltwise' bottom: 'r' bottom: 's' top: 'k' }"),
  };
  for (const std::string& text : apart) {
    auto other = Build(text, Engine::kFast, true);
    ASSERT_NE(other, nullptr);
    EXPECT_FALSE(other->layer_by_name("relu")->fused()) << text;
  }
  // Not under the reference engine, nor with fusion off.
  auto reference =
      Build(ResidualText("bottom: 'a' bottom: 'b'", kSumRelu), Engine::kReference, true);
  ASSERT_NE(reference, nullptr);
  EXPECT_FALSE(reference->layer_by_name("relu")->fused());
  auto off = Build(ResidualText("bottom: 'a' bottom: 'b'", kSumRelu), Engine::kFast, false);
  ASSERT_NE(off, nullptr);
  EXPECT_FALSE(off->layer_by_name("relu")->fused());
}

// Against the fast engine apart: two convolutions of the same input add up
// oneDNN's and the reference's differences (2e-4 relative in x's gradient).
TEST(EltwiseReluFusionTest, TrainsAsTheLayersApart) {
  ExpectTrainsAsReference(ResidualText("bottom: 'a' bottom: 'b'", kSumRelu), Engine::kFast, true,
                          Engine::kFast);
  // Coefficients, three bottoms, a leaky ReLU.
  ExpectTrainsAsReference(
      ResidualText("bottom: 'a' bottom: 'b' bottom: 'a' "
                   "eltwise_param { operation: SUM coeff: 1 coeff: -0.5 coeff: 2 }",
                   "layer { name: 'relu' type: 'ReLU' bottom: 's' top: 's' "
                   "relu_param { negative_slope: 0.1 } }"),
      Engine::kFast, true, Engine::kFast);
}

TEST(EltwiseReluFusionTest, TimedWithoutALossAsTheLayersApart) {
  TimedNets t = TimeWithoutALoss(ResidualText("bottom: 'a' bottom: 'b'", kSumRelu), "sum", 23);
  ASSERT_NE(t.net, nullptr);
  Net* reference = t.reference.get();
  Net* net = t.net.get();
  for (const char* blob : {"a", "b", "s"}) {
    ExpectVectorsNear(Data(*reference->blob_by_name(blob)), Data(*net->blob_by_name(blob)),
                      std::string("data of ") + blob);
  }
  for (const char* blob : {"a", "b"}) {
    ExpectAGradient(Diff(*net->blob_by_name(blob)), std::string("diff of ") + blob);
    ExpectVectorsNear(Diff(*reference->blob_by_name(blob)), Diff(*net->blob_by_name(blob)),
                      std::string("diff of ") + blob);
  }
}

TEST(BatchNormScaleFusionTest, ResNet50FusesEveryPairAndEveryRelu) {
  NetOptions options;
  options.source = std::string(PSTRAIN_SOURCE_DIR) + "/configs/nets/resnet50_deploy.prototxt";
  auto net = Net::FromFile(options.source, options);
  ASSERT_TRUE(net.ok()) << net.status().message();
  int batch_norms = 0, fused = 0, scales_fused = 0, relus = 0, relus_fused = 0, sums_fused = 0;
  for (const auto& layer : net.value()->layers()) {
    const std::string type = layer->type();
    const bool is_fused = layer->Implementation() == "fused";
    batch_norms += type == "BatchNorm";
    fused += type == "BatchNorm" && is_fused;
    scales_fused += type == "Scale" && is_fused;
    relus += type == "ReLU";
    relus_fused += type == "ReLU" && is_fused;
    sums_fused += type == "Eltwise" && is_fused;
  }
  EXPECT_EQ(batch_norms, 53);
  EXPECT_EQ(fused, 53);
  EXPECT_EQ(scales_fused, 53);
  // conv1's and two per bottleneck block (16) into BatchNorms, and the one
  // after each block's residual sum into that Eltwise.
  EXPECT_EQ(relus, 49);
  EXPECT_EQ(relus_fused, 49);
  EXPECT_EQ(sums_fused, 16);
}

TEST(BatchNormScaleFusionTest, GpuTrainsAsTheReference) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  auto net = Build(NetText(kScaleWithBias, kRelu), Engine::kGpu, true);
  ASSERT_NE(net, nullptr);
  for (const char* layer : {"bn", "scale", "relu"}) {
    EXPECT_EQ(net->layer_by_name(layer)->Implementation(), "gpu-fused") << layer;
  }
  ExpectTrainsAsReference(NetText(kScaleWithBias), Engine::kGpu, true);
  ExpectTrainsAsReference(NetText(kScaleWithoutBias), Engine::kGpu, true);
  ExpectTrainsAsReference(
      NetText(std::string("param { lr_mult: 0 } param { lr_mult: 0 } ") + kScaleWithBias),
      Engine::kGpu, true);
  ExpectTrainsAsReference(NetText(kScaleWithBias, kRelu), Engine::kGpu, true);
  ExpectTrainsAsReference(NetText(kScaleWithoutBias, kLeakyRelu), Engine::kGpu, true);
  ExpectTrainsAsReference(BatchNormApartText(), Engine::kGpu, true);
  ExpectOnTheInputOnlyScaleGradients(Engine::kGpu);
  for (const char* after : {"", kLeakyRelu}) {
    SCOPED_TRACE(after);
    ExpectGlobalStatisticsMatch(NetText(kScaleWithBias, after), Engine::kGpu);
  }
}

}  // namespace
}  // namespace pstrain::testing

// Tests of engine auto (worker/net_autotune.hpp) and of ConvolutionLayer's CPU
// implementations: every implementation agrees with the reference forward and
// backward; a bad name is refused with the choices; auto selects one of the
// candidates, logs it, changes no weight, diff, BatchNorm statistic or random
// stream; its cache file is reused, pins a hand-edited choice and names a bad
// line; ps-net time prints the implementation that ran.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "tests/cpp/process_test_util.hpp"
#include "tests/cpp/program_path.hpp"
#include "worker/layers/conv_layer.hpp"
#include "worker/net.hpp"
#include "worker/net_autotune.hpp"
#include "worker/net_timer.hpp"

namespace pstrain::testing {
namespace {

using Shape = std::vector<int>;

std::string GaussianConv(const std::string& conv_param) {
  return "name: 'conv' type: 'Convolution' convolution_param { " + conv_param +
         " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }";
}

struct Run {
  std::vector<float> top, bottom_diff, weight_diff, bias_diff;
};

// Forward and backward of a conv layer running `implementation` (kFast), from
// fixed inputs, weights and top diffs; param diffs start from a fixed non-zero
// value (so accumulation is checked too).
Run RunConv(const std::string& param, const Shape& shape, const std::string& implementation,
            bool bottom_gradient) {
  BlobSet bottoms;
  BlobSet tops;
  BlobSet::FillUniform(bottoms.Add(shape), 11, -1.f, 1.f);
  tops.Add({});
  auto layer = MakeLayer(GaussianConv(param), Engine::kFast);
  EXPECT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
  Status s = layer->SelectCpuImplementation(implementation);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(layer->Implementation(), implementation);
  layer->Forward(bottoms.vec(), tops.vec());
  Run run;
  run.top.assign(tops[0]->cpu_data(), tops[0]->cpu_data() + tops[0]->count());
  Rng rng(99);
  float* top_diff = tops[0]->mutable_cpu_diff();
  for (int64_t i = 0; i < tops[0]->count(); ++i) top_diff[i] = rng.Uniform(-1.f, 1.f);
  for (auto& p : layer->blobs()) {
    std::fill(p->mutable_cpu_diff(), p->mutable_cpu_diff() + p->count(), 0.25f);
  }
  std::fill(bottoms[0]->mutable_cpu_diff(), bottoms[0]->mutable_cpu_diff() + bottoms[0]->count(),
            7.f);
  layer->Backward(tops.vec(), {bottom_gradient}, bottoms.vec());
  run.bottom_diff.assign(bottoms[0]->cpu_diff(), bottoms[0]->cpu_diff() + bottoms[0]->count());
  const Blob& w = *layer->blobs()[0];
  run.weight_diff.assign(w.cpu_diff(), w.cpu_diff() + w.count());
  if (layer->blobs().size() > 1) {
    const Blob& b = *layer->blobs()[1];
    run.bias_diff.assign(b.cpu_diff(), b.cpu_diff() + b.count());
  }
  return run;
}

void ExpectImplementationsAgree(const std::string& param, const Shape& shape) {
  for (bool bottom_gradient : {true, false}) {
    const Run want = RunConv(param, shape, "reference", bottom_gradient);
    BlobSet bottoms;
    BlobSet tops;
    bottoms.Add(shape);
    tops.Add({});
    auto layer = MakeLayer(GaussianConv(param), Engine::kFast);
    ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
    const std::vector<std::string> names = layer->CpuImplementations();
    // "winograd" joins the five for 3x3 kernels, stride 1, no dilation, pad <= 2.
    ASSERT_EQ(names.size(), names.back() == "winograd" ? 6u : 5u);
    for (const std::string& name : names) {
      SCOPED_TRACE(param + " " + name + (bottom_gradient ? "" : " (no bottom gradient)"));
      const Run got = RunConv(param, shape, name, bottom_gradient);
      ExpectBlobsNear(want.top.data(), got.top.data(), want.top.size(), 1e-4f, "top");
      ASSERT_EQ(want.bottom_diff.size(), got.bottom_diff.size());
      if (bottom_gradient) {
        ExpectBlobsNear(want.bottom_diff.data(), got.bottom_diff.data(), want.bottom_diff.size(),
                        1e-4f, "bottom diff");
      } else {  // not asked for: left alone
        EXPECT_EQ(got.bottom_diff, std::vector<float>(got.bottom_diff.size(), 7.f));
      }
      ExpectBlobsNear(want.weight_diff.data(), got.weight_diff.data(), want.weight_diff.size(),
                      1e-4f, "weight diff");
      ExpectBlobsNear(want.bias_diff.data(), got.bias_diff.data(), want.bias_diff.size(), 1e-4f,
                      "bias diff");
    }
  }
}

TEST(ConvImplementationsTest, OneInputChannelAndLeNetShapes) {
  ExpectImplementationsAgree("num_output: 20 kernel_size: 5", {4, 1, 28, 28});
  ExpectImplementationsAgree("num_output: 50 kernel_size: 5", {4, 20, 12, 12});
}

TEST(ConvImplementationsTest, GroupsPadStrideDilation) {
  ExpectImplementationsAgree("num_output: 32 kernel_size: 3 pad: 1 group: 4", {2, 16, 9, 9});
  ExpectImplementationsAgree("num_output: 16 kernel_size: 3 dilation: 2 pad: 2", {2, 8, 13, 11});
  ExpectImplementationsAgree("num_output: 16 kernel_size: 3 stride: 2 pad: 1", {2, 8, 15, 12});
  ExpectImplementationsAgree(
      "num_output: 8 kernel_h: 5 kernel_w: 3 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0 "
      "bias_term: false",
      {2, 6, 11, 9});
  ExpectImplementationsAgree("num_output: 24 kernel_size: 1", {2, 16, 7, 7});
}

// Winograd F(2x2, 3x3): pad 0, 1 and 2, odd and even output sizes (half-used
// last tiles), rectangular images, groups, no bias; every implementation agrees.
TEST(ConvImplementationsTest, WinogradShapes) {
  ExpectImplementationsAgree("num_output: 12 kernel_size: 3 pad: 1", {2, 5, 13, 13});
  ExpectImplementationsAgree("num_output: 8 kernel_size: 3", {3, 4, 10, 7});
  ExpectImplementationsAgree("num_output: 6 kernel_size: 3 pad: 2 group: 2", {2, 6, 5, 8});
  ExpectImplementationsAgree(
      "num_output: 4 kernel_h: 3 kernel_w: 3 pad_h: 0 pad_w: 2 bias_term: false", {1, 3, 6, 3});
  ExpectImplementationsAgree("num_output: 1 kernel_size: 3 pad: 1", {1, 1, 1, 1});
}

// Two bottoms, and backward passes that take turns at the bottom and the weight
// gradients (as layer-cputime --split runs them): "winograd" reuses the
// forward's transformed input only while it holds the forwarded bottom's.
TEST(ConvImplementationsTest, WinogradTwoBottomsAndSplitBackward) {
  const std::string param = "num_output: 6 kernel_size: 3 pad: 1 group: 2";
  const Shape shape = {2, 4, 7, 6};
  struct Layers {
    BlobSet bottoms, tops;
    std::unique_ptr<Layer> layer;
  };
  auto make = [&](const std::string& implementation) {
    auto l = std::make_unique<Layers>();
    for (int i = 0; i < 2; ++i) {
      BlobSet::FillUniform(l->bottoms.Add(shape), 11 + i, -1.f, 1.f);
      l->tops.Add({});
    }
    l->layer = MakeLayer(GaussianConv(param), Engine::kFast);
    EXPECT_TRUE(l->layer->SetUp(l->bottoms.vec(), l->tops.vec()).ok());
    EXPECT_TRUE(l->layer->SelectCpuImplementation(implementation).ok());
    l->layer->Forward(l->bottoms.vec(), l->tops.vec());
    Rng rng(99);
    for (int i = 0; i < 2; ++i) {
      float* top_diff = l->tops[i]->mutable_cpu_diff();
      for (int64_t j = 0; j < l->tops[i]->count(); ++j) top_diff[j] = rng.Uniform(-1.f, 1.f);
    }
    for (auto& p : l->layer->blobs()) {
      std::fill(p->mutable_cpu_diff(), p->mutable_cpu_diff() + p->count(), 0.f);
    }
    return l;
  };
  auto want = make("reference");
  auto got = make("winograd");
  auto expect_near = [&](const char* what) {
    SCOPED_TRACE(what);
    for (int i = 0; i < 2; ++i) {
      ExpectBlobsNear(want->tops[i]->cpu_data(), got->tops[i]->cpu_data(), want->tops[i]->count(),
                      1e-4f, "top");
      ExpectBlobsNear(want->bottoms[i]->cpu_diff(), got->bottoms[i]->cpu_diff(),
                      want->bottoms[i]->count(), 1e-4f, "bottom diff");
    }
    for (size_t p = 0; p < want->layer->blobs().size(); ++p) {
      ExpectBlobsNear(want->layer->blobs()[p]->cpu_diff(), got->layer->blobs()[p]->cpu_diff(),
                      want->layer->blobs()[p]->count(), 1e-4f, "param diff");
    }
  };
  for (Layers* l : {want.get(), got.get()}) {
    l->layer->Backward(l->tops.vec(), {true, true}, l->bottoms.vec());
  }
  expect_near("both gradients");
  // Forward again, then bottom gradients only (parameter gradients off), then
  // parameter gradients only.
  for (Layers* l : {want.get(), got.get()}) {
    l->layer->Forward(l->bottoms.vec(), l->tops.vec());
    for (int p = 0; p < 2; ++p) l->layer->set_param_propagate_down(p, false);
    l->layer->Backward(l->tops.vec(), {true, true}, l->bottoms.vec());
    for (int p = 0; p < 2; ++p) l->layer->set_param_propagate_down(p, true);
    l->layer->Backward(l->tops.vec(), {false, false}, l->bottoms.vec());
  }
  expect_near("the two halves apart (parameter diffs summed twice)");
}

// "winograd" is offered exactly where it computes the geometry.
TEST(ConvImplementationsTest, WinogradOnlyFor3x3Stride1) {
  auto offered = [](const std::string& param) {
    BlobSet bottoms;
    BlobSet tops;
    bottoms.Add({1, 2, 9, 9});
    tops.Add({});
    auto layer = MakeLayer(GaussianConv(param), Engine::kFast);
    EXPECT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok()) << param;
    const std::vector<std::string> names = layer->CpuImplementations();
    return std::find(names.begin(), names.end(), "winograd") != names.end();
  };
  EXPECT_TRUE(offered("num_output: 2 kernel_size: 3 pad: 1"));
  EXPECT_TRUE(offered("num_output: 2 kernel_size: 3 pad: 2 group: 2"));
  EXPECT_FALSE(offered("num_output: 2 kernel_size: 3 pad: 3"));
  EXPECT_FALSE(offered("num_output: 2 kernel_size: 3 stride: 2"));
  EXPECT_FALSE(offered("num_output: 2 kernel_size: 3 dilation: 2"));
  EXPECT_FALSE(offered("num_output: 2 kernel_size: 5"));
  EXPECT_FALSE(offered("num_output: 2 kernel_size: 1"));
  EXPECT_FALSE(offered("num_output: 2 kernel_h: 3 kernel_w: 1"));
  EXPECT_FALSE(offered("num_output: 2 kernel_h: 1 kernel_w: 3"));
  // Not offered, not selectable: the error names the choices.
  BlobSet bottoms;
  BlobSet tops;
  bottoms.Add({1, 1, 6, 6});
  tops.Add({});
  auto layer = MakeLayer(GaussianConv("num_output: 2 kernel_size: 5"), Engine::kFast);
  ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
  Status s = layer->SelectCpuImplementation("winograd");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "layer conv (Convolution) has no CPU implementation 'winograd' (choices: "
            "onednn-blocked, onednn, onednn-blocked+gemm-wgrad, onednn+gemm-wgrad, reference)");
}

TEST(ConvImplementationsTest, BadNameIsRefusedWithTheChoices) {
  BlobSet bottoms;
  BlobSet tops;
  bottoms.Add({1, 1, 6, 6});
  tops.Add({});
  auto layer = MakeLayer(GaussianConv("num_output: 2 kernel_size: 3"), Engine::kFast);
  ASSERT_TRUE(layer->SetUp(bottoms.vec(), tops.vec()).ok());
  ASSERT_TRUE(layer->SelectCpuImplementation("onednn").ok());
  Status s = layer->SelectCpuImplementation("fft");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "layer conv (Convolution) has no CPU implementation 'fft' (choices: "
            "onednn-blocked, onednn, onednn-blocked+gemm-wgrad, onednn+gemm-wgrad, reference, "
            "winograd)");
  EXPECT_EQ(layer->CpuImplementation(), "onednn");  // unchanged
  // Engine reference runs the reference whatever was selected.
  layer->set_engine(Engine::kReference);
  EXPECT_EQ(layer->Implementation(), "reference");
}

// DummyData (gaussian, drawn every forward) -> conv -> BatchNorm -> ReLU -> IP -> loss.
constexpr const char* kNet = R"(
name: 'auto'
layer { name: 'data' type: 'DummyData' top: 'data' top: 'label'
  dummy_data_param { shape { dim: 4 dim: 1 dim: 12 dim: 12 } shape { dim: 4 }
    data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 1 } } }
layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
  convolution_param { num_output: 6 kernel_size: 3
    weight_filler { type: 'gaussian' std: 0.3 } bias_filler { type: 'gaussian' std: 0.3 } } }
layer { name: 'bn1' type: 'BatchNorm' bottom: 'conv1' top: 'conv1' }
layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }
layer { name: 'ip' type: 'InnerProduct' bottom: 'conv1' top: 'ip'
  inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
)";

// Every learnable blob's data and diff, and every net blob's data.
std::vector<std::vector<float>> State(const Net& net) {
  std::vector<std::vector<float>> state;
  for (const auto& layer : net.layers()) {
    for (const auto& b : layer->blobs()) {
      state.emplace_back(b->cpu_data(), b->cpu_data() + b->count());
      state.emplace_back(b->cpu_diff(), b->cpu_diff() + b->count());
    }
  }
  return state;
}

NetOptions AutoOptions(const std::string& cache, std::vector<ImplementationChoice>* log) {
  NetOptions options;
  options.context.engine = Engine::kFast;
  options.autotune.enabled = true;
  options.autotune.cache_path = cache;
  options.autotune.repetitions = 1;
  options.autotune.on_choice = [log](const ImplementationChoice& c) { log->push_back(c); };
  return options;
}

TEST(EngineAutoTest, SelectsLogsAndChangesNoState) {
  TempDir dir;
  std::vector<ImplementationChoice> log;
  auto plain = BuildNet(kNet, NetOptions{});
  auto tuned = BuildNet(kNet, AutoOptions(dir / "cache.tsv", &log));
  ASSERT_TRUE(plain && tuned);
  // One line per layer with more than one implementation, in layer order.
  std::vector<std::string> tuned_layers;
  for (const auto& c : log) tuned_layers.push_back(c.layer);
  for (const auto& layer : tuned->layers()) {
    const bool several = layer->CpuImplementations().size() > 1;
    EXPECT_EQ(std::count(tuned_layers.begin(), tuned_layers.end(), layer->name()), several ? 1 : 0)
        << layer->name();
  }
  ASSERT_GE(log.size(), 2u);  // conv1 and bn1 at least
  EXPECT_EQ(log[0].layer, "conv1");
  EXPECT_EQ(log.size(), tuned->implementation_choices().size());
  for (const auto& c : log) {
    Layer* layer = tuned->layer_by_name(c.layer);
    const auto names = layer->CpuImplementations();
    EXPECT_EQ(c.source, "timed");
    ASSERT_EQ(c.candidates_ms.size(), names.size());
    EXPECT_NE(std::find(names.begin(), names.end(), c.implementation), names.end());
    EXPECT_EQ(layer->CpuImplementation(), c.implementation);
    EXPECT_NE(c.Describe().find("engine auto: layer '" + c.layer + "' (" + c.type + "): "),
              std::string::npos);
    EXPECT_NE(c.Describe().find("-> " + c.implementation + " (timed)"), std::string::npos);
  }
  // Weights, diffs and BatchNorm's statistics are those of the untimed net,
  // bit for bit; so is the data (DummyData's random stream was not drawn).
  EXPECT_EQ(State(*plain), State(*tuned));
  plain->Forward();
  tuned->Forward();
  const Blob& a = *plain->blob_by_name("data");
  const Blob& b = *tuned->blob_by_name("data");
  EXPECT_EQ(std::vector<float>(a.cpu_data(), a.cpu_data() + a.count()),
            std::vector<float>(b.cpu_data(), b.cpu_data() + b.count()));
  EXPECT_NEAR(plain->blob_by_name("loss")->cpu_data()[0],
              tuned->blob_by_name("loss")->cpu_data()[0], 1e-4);
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(EngineAutoTest, CacheFileIsReusedPinsAndNamesBadLines) {
  TempDir dir;
  const std::string cache = dir / "sub/cache.tsv";  // the folder is created
  std::vector<ImplementationChoice> first, second;
  // batch 3: a shape no other test tunes, so this process has no choice yet.
  std::string net = kNet;
  net.replace(net.find("dim: 4 dim: 1"), 13, "dim: 3 dim: 1");
  net.replace(net.find("shape { dim: 4 }"), 16, "shape { dim: 3 }");
  ASSERT_TRUE(BuildNet(net, AutoOptions(cache, &first)));
  const std::vector<std::string> lines = Lines(cache);
  ASSERT_EQ(lines.size(), first.size());
  for (const auto& c : first) EXPECT_EQ(c.source, "timed");
  ASSERT_TRUE(BuildNet(net, AutoOptions(cache, &second)));
  ASSERT_EQ(second.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(second[i].source, "cache file");
    EXPECT_EQ(second[i].implementation, first[i].implementation);
    EXPECT_TRUE(second[i].candidates_ms.empty());
  }
  EXPECT_EQ(Lines(cache).size(), lines.size());  // nothing new appended

  // A hand-edited line pins the choice.
  const std::string conv_line = lines[0];
  ASSERT_EQ(conv_line.rfind("Convolution | ", 0), 0u) << conv_line;
  const std::string key = conv_line.substr(0, conv_line.rfind('\t'));
  WriteTextFile(cache, "# pinned by hand\n" + key + "\treference\n");
  std::vector<ImplementationChoice> pinned;
  auto pinned_net = BuildNet(net, AutoOptions(cache, &pinned));
  ASSERT_TRUE(pinned_net);
  EXPECT_EQ(pinned[0].implementation, "reference");
  EXPECT_EQ(pinned[0].source, "cache file");
  EXPECT_EQ(pinned_net->layer_by_name("conv1")->Implementation(), "reference");

  // A name the layer lacks: an error naming the file and line.
  WriteTextFile(cache, "# pinned by hand\n" + key + "\tfft\n");
  std::vector<ImplementationChoice> unused;
  EXPECT_EQ(NetError(net, AutoOptions(cache, &unused)),
            "<net>: engine auto: " + cache +
                ":2: layer conv1 (Convolution) has no CPU implementation 'fft' (choices: "
                "onednn-blocked, onednn, onednn-blocked+gemm-wgrad, onednn+gemm-wgrad, "
                "reference, winograd)");
  WriteTextFile(cache, "no tab here\n");
  EXPECT_EQ(NetError(net, AutoOptions(cache, &unused)),
            "<net>: engine auto: " + cache + ":1: expected 'key<TAB>implementation'");
}

// A deploy net (no loss): Input -> conv -> LRN -> ReLU.
constexpr const char* kDeployNet = R"(
name: 'deploy'
layer { name: 'data' type: 'Input' top: 'data'
  input_param { shape { dim: 2 dim: 3 dim: 9 dim: 9 } } }
layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
  convolution_param { num_output: 5 kernel_size: 3 weight_filler { type: 'gaussian' std: 0.3 } } }
layer { name: 'norm1' type: 'LRN' bottom: 'conv1' top: 'norm1'
  lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 } }
layer { name: 'relu1' type: 'ReLU' bottom: 'norm1' top: 'norm1' }
)";

// The "| backward ... |" part of the cache line of `type`.
std::string BackwardOfKey(const std::vector<std::string>& lines, const std::string& type) {
  for (const auto& line : lines) {
    if (line.rfind(type + " | ", 0) != 0) continue;
    const size_t at = line.find(" | backward ");
    return line.substr(at + 12, line.find(" | ", at + 12) - at - 12);
  }
  return "no line for " + type;
}

// A deploy net runs no backward in training terms, but ps-net time (TimeNet)
// runs one: with AutotuneBackward::kAsNetTimer the candidates are timed, and
// keyed, with the passes TimeNet runs (issue 32: LRN's oneDNN backward is its
// slow reference kernel, and a forward-only timing picked it for AlexNet).
TEST(EngineAutoTest, PsNetTimeTimesTheBackwardItRuns) {
  TempDir dir;
  std::vector<ImplementationChoice> log;
  NetOptions needs = AutoOptions(dir / "needs.tsv", &log);
  ASSERT_TRUE(BuildNet(kDeployNet, needs));
  EXPECT_EQ(BackwardOfKey(Lines(dir / "needs.tsv"), "Convolution"), "none");
  EXPECT_EQ(BackwardOfKey(Lines(dir / "needs.tsv"), "LRN"), "none");

  NetOptions timer = AutoOptions(dir / "timer.tsv", &log);
  timer.autotune.backward = AutotuneBackward::kAsNetTimer;
  auto net = BuildNet(kDeployNet, timer);
  ASSERT_TRUE(net);
  // conv1: weights and bias get gradients, the input image none; norm1's bottom one.
  EXPECT_EQ(BackwardOfKey(Lines(dir / "timer.tsv"), "Convolution"), "0pp");
  EXPECT_EQ(BackwardOfKey(Lines(dir / "timer.tsv"), "LRN"), "1");
  EXPECT_EQ(TimedPropagateDown(*net),
            (std::vector<std::vector<bool>>{{}, {false}, {true}, {true}}));

  // ps-net time keys (and times) its choices so.
  WriteTextFile(dir / "deploy.prototxt", kDeployNet);
  ProgramRun r = RunProgramBounded({ProgramPath("ps-net"), "time", "--model",
                                    dir / "deploy.prototxt", "--iterations", "1", "--threads", "1",
                                    "--engine-cache", dir / "ps_net.tsv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(BackwardOfKey(Lines(dir / "ps_net.tsv"), "LRN"), "1");
  EXPECT_EQ(BackwardOfKey(Lines(dir / "ps_net.tsv"), "Convolution"), "0pp");
}

TEST(EngineAutoTest, PsNetTimeShowsTheImplementation) {
  TempDir dir;
  WriteTextFile(dir / "net.prototxt", kNet);
  const std::string ps_net = ProgramPath("ps-net");
  ProgramRun r =
      RunProgramBounded({ps_net, "time", "--model", dir / "net.prototxt", "--iterations", "2",
                         "--threads", "1", "--json", "--engine-cache", dir / "cache.tsv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // One log line per tuned layer on stderr; the layer table carries the choice.
  EXPECT_NE(r.err.find("engine auto: layer 'conv1' (Convolution): onednn-blocked "),
            std::string::npos)
      << r.err;
  const std::string conv_event = r.out.substr(r.out.find("\"layer\":\"conv1\""));
  const std::string chosen = r.err.substr(r.err.find("-> ", r.err.find("'conv1'")) + 3);
  const std::string name = chosen.substr(0, chosen.find(' '));
  EXPECT_NE(conv_event.find("\"implementation\":\"" + name + "\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"layer\":\"relu1\""), std::string::npos);

  // Engine fast: the defaults, nothing timed, and the text table names them.
  r = RunProgramBounded({ps_net, "time", "--model", dir / "net.prototxt", "--iterations", "1",
                         "--threads", "1", "--engine", "fast"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("engine auto"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("backward: "), std::string::npos);
  const std::string conv_row = r.out.substr(r.out.find("conv1 Convolution"));
  EXPECT_NE(conv_row.substr(0, conv_row.find('\n')).find("onednn-blocked"), std::string::npos)
      << r.out;

  r = RunProgramBounded({ps_net, "time", "--model", dir / "net.prototxt", "--engine", "turbo"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--engine must be 'auto', 'fast' or 'reference', got 'turbo'"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace pstrain::testing

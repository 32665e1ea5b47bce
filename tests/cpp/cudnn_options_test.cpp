// The host side of the GPU engine's speed options, on every build: the cuDNN
// algorithm filter (worker/layers/cudnn_algo_filter.hpp) on hand-made
// measurement lists, the process settings and their parsing
// (worker/layers/cudnn_conv_api.hpp), and how TimeNet times whole passes
// (worker/net_timer.hpp). The GPU side is in gpu_cuda_graph_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/device.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/cuda_graph_pass.hpp"
#include "worker/layers/cudnn_algo_filter.hpp"
#include "worker/layers/cudnn_conv_api.hpp"
#include "worker/net_timer.hpp"

namespace pstrain {
namespace {

// cuDNN's order (fastest first): a failed one, a TF32 one, one over the
// workspace limit, a non-deterministic one, then two that pass.
std::vector<ConvAlgoCandidate> Measured() {
  return {
      {7, false, 0, false, true},    // measurement failed
      {6, true, 0, true, true},      // tensor-op (TF32) math
      {5, true, 4096, false, true},  // needs more than the 1024-byte limit
      {0, true, 0, false, false},    // non-deterministic (atomics)
      {1, true, 1024, false, true},  // exactly the limit
      {3, true, 16, false, false},   // non-deterministic, small workspace
      {2, true, 0, false, true},     // deterministic, no workspace
  };
}

std::vector<int> Algos(const ConvAlgoList& list) {
  std::vector<int> algos;
  for (const ConvAlgo& a : list) algos.push_back(a.algo);
  return algos;
}

TEST(CudnnAlgoFilter, DeterministicKeepsOnlyDeterministicAlgorithmsInCudnnOrder) {
  const ConvAlgoList kept = FilterConvAlgorithms(Measured(), 1024, false);
  EXPECT_EQ(Algos(kept), (std::vector<int>{1, 2}));
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].workspace, 1024u);
  EXPECT_TRUE(kept[0].deterministic);
  EXPECT_EQ(kept[1].workspace, 0u);
}

TEST(CudnnAlgoFilter, NondeterministicAlsoKeepsAtomicsAlgorithmsAndMarksThem) {
  const ConvAlgoList kept = FilterConvAlgorithms(Measured(), 1024, true);
  EXPECT_EQ(Algos(kept), (std::vector<int>{0, 1, 3, 2}));
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_FALSE(kept[0].deterministic);
  EXPECT_TRUE(kept[1].deterministic);
  EXPECT_FALSE(kept[2].deterministic);
  EXPECT_EQ(kept[2].workspace, 16u);
}

TEST(CudnnAlgoFilter, TensorOpAndFailedAreNeverKeptAndTheLimitBinds) {
  EXPECT_EQ(Algos(FilterConvAlgorithms(Measured(), size_t{1} << 30, true)),
            (std::vector<int>{5, 0, 1, 3, 2}));
  EXPECT_EQ(Algos(FilterConvAlgorithms(Measured(), 0, false)), (std::vector<int>{2}));
  EXPECT_TRUE(FilterConvAlgorithms({}, 1024, true).empty());
}

TEST(CudnnSettings, ParseApiNamesThePlaceAndTheValue) {
  ASSERT_TRUE(ParseCudnnConvApi("graph", "--cudnn-api").ok());
  EXPECT_EQ(ParseCudnnConvApi("graph", "--cudnn-api").value(), CudnnConvApi::kGraph);
  EXPECT_EQ(ParseCudnnConvApi("legacy", "--cudnn-api").value(), CudnnConvApi::kLegacy);
  const auto bad = ParseCudnnConvApi("Graph", "--cudnn-api");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsInvalidArgument());
  EXPECT_EQ(bad.status().message(), "--cudnn-api: 'Graph' is not legacy or graph");
}

TEST(CudnnSettings, DeterministicByDefaultAndSettable) {
  // pstrain_tests runs without PSTRAIN_CUDNN_NONDETERMINISTIC (ctest, gpu_check.sh).
  EXPECT_TRUE(GetCudnnDeterministic());
  SetCudnnDeterministic(false);
  EXPECT_FALSE(GetCudnnDeterministic());
  SetCudnnDeterministic(true);
  EXPECT_TRUE(GetCudnnDeterministic());
}

const char* kTinyNet = R"(
name: 'tiny'
layer { name: 'x' type: 'Input' top: 'x' input_param { shape { dim: 2 dim: 3 } } }
layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'y'
        inner_product_param { num_output: 2 weight_filler { type: 'constant' value: 0.5 } } }
)";

std::unique_ptr<Net> TinyNet() {
  NetOptions options;
  options.context.engine = Engine::kReference;
  auto net = Net::Create(testing::ParseNet(kTinyNet), options);
  EXPECT_TRUE(net.ok()) << net.status().message();
  return std::move(net).value();
}

TEST(NetTimerWholePasses, WithASyncTheTotalsComeFromWholePassesRunThroughTheRunner) {
  auto net = TinyNet();
  int syncs = 0, runs = 0;
  NetTimerOptions options;
  options.sync = [&] { ++syncs; };
  options.run_whole_pass = [&](const std::function<void()>& pass) {
    ++runs;
    pass();
    return Status::Ok();
  };
  auto t = TimeNet(*net, 3, options);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(t.value().whole_passes);
  EXPECT_EQ(t.value().iterations, 3);
  EXPECT_EQ(runs, 4);  // one untimed (a graph's capture), three timed
  // Per-layer passes: warm-up + 3, each 2 layers forward and backward; whole passes: 1 + 3.
  EXPECT_EQ(syncs, 4 * 2 * 2 + 4);
  EXPECT_EQ(t.value().layers.size(), 2u);
}

TEST(NetTimerWholePasses, WithoutASyncTheLayerPassesGiveTheTotals) {
  auto net = TinyNet();
  int runs = 0;
  NetTimerOptions options;
  options.run_whole_pass = [&](const std::function<void()>& pass) {
    ++runs;
    pass();
    return Status::Ok();
  };
  auto t = TimeNet(*net, 2, options);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t.value().whole_passes);
  EXPECT_EQ(runs, 0);
}

TEST(NetTimerWholePasses, ARunnerErrorIsReturned) {
  auto net = TinyNet();
  NetTimerOptions options;
  options.sync = [] {};
  options.run_whole_pass = [](const std::function<void()>&) {
    return Status::FailedPrecondition("launching the captured CUDA graph: refused");
  };
  auto t = TimeNet(*net, 2, options);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "launching the captured CUDA graph: refused");
}

TEST(CudaGraphPassHost, WithoutCudaRunIsRefusedAndThePassNotRun) {
  if (BuiltWithCuda()) GTEST_SKIP() << "a CUDA build: gpu_cuda_graph_test.cpp covers it";
  CudaGraphPass graph;
  bool ran = false;
  const Status s = graph.Run([&] { ran = true; });
  EXPECT_TRUE(s.IsFailedPrecondition());
  EXPECT_EQ(s.message(), "CUDA graphs need a CUDA build");
  EXPECT_FALSE(ran);
  EXPECT_FALSE(graph.captured());
  EXPECT_EQ(graph.launches(), 0);
}

}  // namespace
}  // namespace pstrain

// The convolution's GPU path through cuDNN's graph API (PSTRAIN_CUDNN_API=graph,
// worker/layers/cudnn_conv_api.hpp): against the reference path (tops and every
// gradient), by finite differences, against the legacy calls on the same
// inputs, and bit-identical between reruns (deterministic engines only). Each
// check also asserts, through the graph counters, that plans were built and run
// and no call fell back to the legacy calls, so a graph path that silently
// served nothing fails. Every GPU test skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"
#include "worker/layers/cudnn_conv_api.hpp"
#ifdef PSTRAIN_HAVE_CUDA
#include "worker/layers/cudnn_graph_conv.hpp"
#endif

namespace pstrain::testing {
namespace {

using Shape = std::vector<int>;

// Sets the process's cuDNN API for the test's lifetime.
class ApiScope {
 public:
  explicit ApiScope(CudnnConvApi api) : saved_(GetCudnnConvApi()) { SetCudnnConvApi(api); }
  ~ApiScope() { SetCudnnConvApi(saved_); }

 private:
  CudnnConvApi saved_;
};

std::string Conv(const std::string& param) {
  return "name: 'conv' type: 'Convolution' convolution_param { " + param +
         " weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'gaussian' std: 0.5 } }";
}

void Gaussian(const BlobVec& b) {
  for (size_t i = 0; i < b.size(); ++i) BlobSet::FillGaussian(b[i], 100 + i);
}

// What one forward and backward pass gave: top, bottom diff, weight and bias diffs.
struct Pass {
  std::vector<float> top, bottom_diff, weight_diff, bias_diff;
  std::string implementation;  // Layer::Implementation() after the pass
};

std::vector<float> Copy(const float* p, int64_t n) { return std::vector<float>(p, p + n); }

// Runs `layer` on the GPU under `api`: forward, then backward from a fixed
// top diff, with fixed bottoms and params (param diffs start at zero).
Pass RunOnGpu(const std::string& layer, const Shape& shape, CudnnConvApi api) {
  ApiScope scope(api);
  BlobSet bottoms, tops, scratch;
  bottoms.Add(shape);
  tops.Add({});
  BlobSet::FillGaussian(bottoms[0], 7);
  auto l = MakeLayer(layer, Engine::kGpu);
  EXPECT_TRUE(l->SetUp(bottoms.vec(), tops.vec()).ok());
  for (size_t p = 0; p < l->blobs().size(); ++p) {
    Blob* param = l->blobs()[p].get();
    BlobSet::FillGaussian(param, 20 + p, 0.1f);
    std::memset(param->mutable_cpu_diff(), 0, sizeof(float) * param->count());
  }
  l->Forward(bottoms.vec(), tops.vec());
  Blob* dy = scratch.Add(tops[0]->shape());
  BlobSet::FillGaussian(dy, 8);
  std::memcpy(tops[0]->mutable_cpu_diff(), dy->cpu_data(), sizeof(float) * dy->count());
  l->Backward(tops.vec(), {true}, bottoms.vec());
  Pass pass;
  pass.implementation = l->Implementation();
  pass.top = Copy(tops[0]->cpu_data(), tops[0]->count());
  pass.bottom_diff = Copy(bottoms[0]->cpu_diff(), bottoms[0]->count());
  pass.weight_diff = Copy(l->blobs()[0]->cpu_diff(), l->blobs()[0]->count());
  if (l->blobs().size() > 1) {
    pass.bias_diff = Copy(l->blobs()[1]->cpu_diff(), l->blobs()[1]->count());
  }
  return pass;
}

// Layers whose shapes cover what the graph path builds: padding, strides,
// groups, dilation, rectangular kernels, a 1x1 kernel without bias.
const char* const kLayers[] = {
    "num_output: 32 kernel_size: 3 pad: 1",
    "num_output: 24 kernel_size: 5 stride: 2 pad: 2",
    "num_output: 12 kernel_size: 3 group: 4 dilation: 2 stride: 2 pad: 1",
    "num_output: 6 kernel_h: 3 kernel_w: 2 pad_h: 1 pad_w: 0",
    "num_output: 8 kernel_size: 1 bias_term: false",
};
const Shape kShapes[] = {
    {4, 16, 20, 20}, {2, 3, 31, 29}, {2, 8, 15, 17}, {2, 4, 7, 8}, {2, 12, 9, 9}};

TEST(GpuConvGraphTest, AgreesWithTheReferenceAndRunsOnlyGraphPlans) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  ApiScope scope(CudnnConvApi::kGraph);
  const CudnnGraphCounts before = GetCudnnGraphCounts();
  for (size_t i = 0; i < std::size(kLayers); ++i) {
    SCOPED_TRACE(kLayers[i]);
    ExpectEnginesAgree(Conv(kLayers[i]), {kShapes[i]}, Gaussian, 1e-4f, 1, Engine::kGpu);
  }
  ExpectEnginesAgree(Conv("num_output: 6 kernel_h: 3 kernel_w: 2 pad_h: 1 pad_w: 0"),
                     {{2, 4, 7, 8}, {2, 4, 7, 8}}, Gaussian, 1e-4f, 2, Engine::kGpu);
  const CudnnGraphCounts after = GetCudnnGraphCounts();
  // Plans are cached per process: counted in all, not since `before`.
  EXPECT_GE(after.plan_sets, 3) << "no graph plans were built";
  EXPECT_GE(after.runs - before.runs, 3 * static_cast<int64_t>(std::size(kLayers)));
  EXPECT_EQ(after.fallbacks, before.fallbacks) << "calls fell back to the legacy calls";
}

TEST(GpuConvGraphTest, GradientsByFiniteDifferences) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  ApiScope scope(CudnnConvApi::kGraph);
  const CudnnGraphCounts before = GetCudnnGraphCounts();
  BlobSet bottoms, tops;
  bottoms.Add({2, 4, 5, 6});
  tops.Add({});
  Gaussian(bottoms.vec());
  auto l = MakeLayer(Conv("num_output: 4 kernel_size: 3 group: 2 pad: 1 stride: 2"), Engine::kGpu);
  ASSERT_TRUE(l->SetUp(bottoms.vec(), tops.vec()).ok());
  CheckGradients(*l, bottoms.vec(), tops.vec());
  const CudnnGraphCounts after = GetCudnnGraphCounts();
  EXPECT_GT(after.runs, before.runs);
  EXPECT_EQ(after.fallbacks, before.fallbacks);
}

TEST(GpuConvGraphTest, MatchesTheLegacyCallsAndRerunsBitIdentically) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  for (size_t i = 0; i < std::size(kLayers); ++i) {
    SCOPED_TRACE(kLayers[i]);
    const Pass legacy = RunOnGpu(Conv(kLayers[i]), kShapes[i], CudnnConvApi::kLegacy);
    const CudnnGraphCounts before = GetCudnnGraphCounts();
    const Pass graph = RunOnGpu(Conv(kLayers[i]), kShapes[i], CudnnConvApi::kGraph);
    const Pass again = RunOnGpu(Conv(kLayers[i]), kShapes[i], CudnnConvApi::kGraph);
    const CudnnGraphCounts after = GetCudnnGraphCounts();
    // Forward, backward filter and backward data, twice, all through plans.
    EXPECT_EQ(after.runs - before.runs, 6);
    EXPECT_EQ(after.fallbacks, before.fallbacks);
    // "cudnn-legacy fwd:N bwd-data:N bwd-filter:N", the algorithms chosen.
    EXPECT_EQ(legacy.implementation.rfind("cudnn-legacy fwd:", 0), 0u) << legacy.implementation;
    EXPECT_NE(legacy.implementation.find(" bwd-filter:"), std::string::npos)
        << legacy.implementation;
    EXPECT_EQ(graph.implementation, "cudnn-graph");
    ASSERT_EQ(legacy.top.size(), graph.top.size());
    ExpectBlobsNear(legacy.top.data(), graph.top.data(), legacy.top.size(), 1e-4f, "top");
    ExpectBlobsNear(legacy.bottom_diff.data(), graph.bottom_diff.data(), legacy.bottom_diff.size(),
                    1e-4f, "bottom diff");
    ExpectBlobsNear(legacy.weight_diff.data(), graph.weight_diff.data(), legacy.weight_diff.size(),
                    1e-4f, "weight diff");
    ExpectBlobsNear(legacy.bias_diff.data(), graph.bias_diff.data(), legacy.bias_diff.size(), 1e-4f,
                    "bias diff");
    // Deterministic engines: the same plan on the same inputs gives the same bits.
    EXPECT_EQ(graph.top, again.top);
    EXPECT_EQ(graph.bottom_diff, again.bottom_diff);
    EXPECT_EQ(graph.weight_diff, again.weight_diff);
  }
}

#ifdef PSTRAIN_HAVE_CUDA
// The operation descriptors (tensors, convolution, operation) need no device:
// cuDNN checks them when they are finalized, here too.
TEST(CudnnGraphOperationTest, FinalizesForEveryDirectionAndRefusesAWrongOutput) {
  GraphConvShape s;
  s.n = 2, s.c = 8, s.h = 15, s.w = 17, s.k = 12, s.group = 4, s.kernel_h = 3, s.kernel_w = 3;
  s.pad_h = s.pad_w = 1, s.stride_h = s.stride_w = 2, s.dilation_h = s.dilation_w = 2;
  s.out_h = (15 + 2 - (2 * 2 + 1)) / 2 + 1;  // Caffe's output size: 7
  s.out_w = (17 + 2 - (2 * 2 + 1)) / 2 + 1;  // 8
  for (auto d : {GraphConvDirection::kForward, GraphConvDirection::kBackwardData,
                 GraphConvDirection::kBackwardFilter}) {
    const Status ok = GraphConvPlans::CheckOperation(s, d, 16);
    EXPECT_TRUE(ok.ok()) << static_cast<int>(d) << ": " << ok.message();
  }
  // Caffe's floor: (6 + 2 - 3) / 2 + 1 = 3 columns, the last window short of the edge.
  GraphConvShape floored = s;
  floored.group = 1, floored.k = 4, floored.w = 6, floored.dilation_w = 1;
  floored.out_w = (6 + 2 - 3) / 2 + 1;
  for (auto d : {GraphConvDirection::kForward, GraphConvDirection::kBackwardData,
                 GraphConvDirection::kBackwardFilter}) {
    const Status ok = GraphConvPlans::CheckOperation(floored, d, 16);
    EXPECT_TRUE(ok.ok()) << "floored, " << static_cast<int>(d) << ": " << ok.message();
  }
  GraphConvShape wrong = s;
  wrong.out_h += 1;
  const Status refused = GraphConvPlans::CheckOperation(wrong, GraphConvDirection::kForward, 16);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("cuDNN graph API: finalizing the convolution operation: "),
            std::string::npos)
      << refused.message();
}
#endif

TEST(CudnnConvApiTest, SettingAndNames) {
  const CudnnConvApi saved = GetCudnnConvApi();
  SetCudnnConvApi(CudnnConvApi::kGraph);
  EXPECT_EQ(GetCudnnConvApi(), CudnnConvApi::kGraph);
  SetCudnnConvApi(CudnnConvApi::kLegacy);
  EXPECT_EQ(GetCudnnConvApi(), CudnnConvApi::kLegacy);
  EXPECT_STREQ(CudnnConvApiName(CudnnConvApi::kGraph), "graph");
  EXPECT_STREQ(CudnnConvApiName(CudnnConvApi::kLegacy), "legacy");
  SetCudnnConvApi(saved);
}

}  // namespace
}  // namespace pstrain::testing

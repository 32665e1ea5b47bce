// The GPU engine's speed options on a device (each test skips without one,
// naming the reason): a net's forward, backward and SGD step captured once
// as a CUDA graph (worker/cuda_graph_pass.hpp) and launched N times gives the
// weights N eager iterations give, bit for bit, and the launches happened; and
// cuDNN's non-deterministic algorithms are kept by the algorithm filter only
// when allowed (worker/layers/cudnn_conv_api.hpp, GetCudnnAlgoCounts).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/device.hpp"
#include "tests/cpp/gpu_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/cuda_graph_pass.hpp"
#include "worker/layers/cudnn_conv_api.hpp"
#include "worker/net_timer.hpp"
#ifdef PSTRAIN_HAVE_CUDA
#include "common/cuda/math_gpu.hpp"
#endif

namespace pstrain::testing {
namespace {

#ifdef PSTRAIN_HAVE_CUDA

// Convolution, BatchNorm + Scale + ReLU (fused on the GPU), pooling and an
// InnerProduct: the kinds of layer ResNet-50's timing runs, and no layer with
// host-side state that changes per pass (Dropout's seed).
const char* kNet = R"(
name: 'graph_net'
layer { name: 'x' type: 'Input' top: 'x' input_param { shape { dim: 8 dim: 3 dim: 12 dim: 12 } } }
layer { name: 'conv' type: 'Convolution' bottom: 'x' top: 'c'
        convolution_param { num_output: 16 kernel_size: 3 pad: 1
                            weight_filler { type: 'gaussian' std: 0.2 }
                            bias_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'bn' type: 'BatchNorm' bottom: 'c' top: 'c' }
layer { name: 'scale' type: 'Scale' bottom: 'c' top: 'c'
        scale_param { bias_term: true filler { type: 'gaussian' std: 0.5 } } }
layer { name: 'relu' type: 'ReLU' bottom: 'c' top: 'c' }
layer { name: 'pool' type: 'Pooling' bottom: 'c' top: 'p'
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: 'ip' type: 'InnerProduct' bottom: 'p' top: 'y'
        inner_product_param { num_output: 10 weight_filler { type: 'gaussian' std: 0.05 } } }
)";

std::unique_ptr<Net> GpuNet() {
  NetOptions options;
  options.context.engine = Engine::kGpu;
  auto net = BuildNet(kNet, options);
  if (net == nullptr) return nullptr;
  BlobSet::FillGaussian(net->blob_by_name("x"), 3);
  // A fixed gradient of the output, kept across passes (no layer writes it).
  Blob* y = net->blob_by_name("y");
  BlobSet inputs;
  Blob* dy = inputs.Add(y->shape());
  BlobSet::FillGaussian(dy, 4);
  std::memcpy(y->mutable_cpu_diff(), dy->cpu_data(), sizeof(float) * y->count());
  return net;
}

// One training iteration queued on the stream: zero the parameter gradients,
// forward, backward, w -= 0.05 dw (lr_mult 0 blobs, BatchNorm's statistics,
// stay). No host wait inside: capturable.
std::function<void()> Iteration(Net& net) {
  const std::vector<std::vector<bool>> propagate = TimedPropagateDown(net);
  return [&net, propagate] {
    for (const LearnableParam& p : net.learnable_params()) {
      GpuSet(p.blob->count(), 0.f, p.blob->mutable_gpu_diff());
    }
    const auto& layers = net.layers();
    for (size_t i = 0; i < layers.size(); ++i) {
      layers[i]->Forward(net.bottom_vecs()[i], net.top_vecs()[i]);
    }
    for (size_t k = layers.size(); k-- > 0;) {
      layers[k]->Backward(net.top_vecs()[k], propagate[k], net.bottom_vecs()[k]);
    }
    for (const LearnableParam& p : net.learnable_params()) {
      if (p.lr_mult == 0.f) continue;
      GpuAxpy(p.blob->count(), -0.05f, p.blob->gpu_diff(), p.blob->mutable_gpu_data());
    }
  };
}

TEST(GpuCudaGraph, ReplayedIterationsGiveTheEagerWeightsBitForBit) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  constexpr int kIterations = 6;
  auto eager = GpuNet();
  auto replayed = GpuNet();
  ASSERT_NE(eager, nullptr);
  ASSERT_NE(replayed, nullptr);
  const std::vector<std::vector<float>> start = ParamValues(*eager);
  ASSERT_EQ(ParamValues(*replayed), start);

  const std::function<void()> eager_step = Iteration(*eager);
  for (int i = 0; i < kIterations + 1; ++i) eager_step();
  ASSERT_TRUE(FinishGpuWork("eager iterations").ok());

  const std::function<void()> step = Iteration(*replayed);
  step();  // eagerly once: cuDNN's measurements and every allocation happen here
  ASSERT_TRUE(FinishGpuWork("warm-up iteration").ok());
  CudaGraphPass graph;
  for (int i = 0; i < kIterations; ++i) {
    const Status s = graph.Run(step);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  const Status done = FinishGpuWork("replayed iterations");
  ASSERT_TRUE(done.ok()) << done.message();
  EXPECT_TRUE(graph.captured()) << graph.fallback_reason();
  EXPECT_EQ(graph.fallback_reason(), "");
  EXPECT_EQ(graph.launches(), kIterations);
  EXPECT_EQ(graph.eager_runs(), 0);

  const std::vector<std::vector<float>> want = ParamValues(*eager);
  const std::vector<std::vector<float>> got = ParamValues(*replayed);
  ASSERT_EQ(got.size(), want.size());
  bool moved = false;
  for (size_t b = 0; b < want.size(); ++b) {
    ASSERT_EQ(got[b].size(), want[b].size());
    EXPECT_EQ(std::memcmp(got[b].data(), want[b].data(), sizeof(float) * want[b].size()), 0)
        << "learnable blob " << b << " differs after " << kIterations << " replays";
    moved = moved || want[b] != start[b];
  }
  EXPECT_TRUE(moved) << "the iterations changed no weight: the comparison proves nothing";
}

// Sets the process's cuDNN determinism for the scope, with the legacy calls
// (whose measurements GetCudnnAlgoCounts counts), and restores both.
class DeterminismScope {
 public:
  explicit DeterminismScope(bool deterministic)
      : saved_(GetCudnnDeterministic()), saved_api_(GetCudnnConvApi()) {
    SetCudnnDeterministic(deterministic);
    SetCudnnConvApi(CudnnConvApi::kLegacy);
  }
  ~DeterminismScope() {
    SetCudnnDeterministic(saved_);
    SetCudnnConvApi(saved_api_);
  }

 private:
  bool saved_;
  CudnnConvApi saved_api_;
};

// Forward and backward of a convolution of a shape no other test uses (so
// cuDNN measures it here, under the current setting); returns the weight diff.
std::vector<float> ConvPass(int num_output) {
  const std::string layer = "name: 'conv' type: 'Convolution' convolution_param { num_output: " +
                            std::to_string(num_output) +
                            " kernel_size: 3 pad: 1 weight_filler { type: 'gaussian' std: 0.1 } }";
  BlobSet bottoms, tops, scratch;
  bottoms.Add({6, 5, 17, 19});
  tops.Add({});
  BlobSet::FillGaussian(bottoms[0], 7);
  auto l = MakeLayer(layer, Engine::kGpu);
  EXPECT_TRUE(l->SetUp(bottoms.vec(), tops.vec()).ok());
  BlobSet::FillGaussian(l->blobs()[0].get(), 9, 0.1f);
  std::memset(l->blobs()[0]->mutable_cpu_diff(), 0, sizeof(float) * l->blobs()[0]->count());
  l->Forward(bottoms.vec(), tops.vec());
  Blob* dy = scratch.Add(tops[0]->shape());
  BlobSet::FillGaussian(dy, 8);
  std::memcpy(tops[0]->mutable_cpu_diff(), dy->cpu_data(), sizeof(float) * dy->count());
  l->Backward(tops.vec(), {true}, bottoms.vec());
  const float* dw = l->blobs()[0]->cpu_diff();
  return std::vector<float>(dw, dw + l->blobs()[0]->count());
}

TEST(GpuCudnnAlgos, NondeterministicAlgorithmsAreKeptOnlyWhenAllowed) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  std::vector<float> deterministic_dw;
  {
    DeterminismScope scope(true);
    const CudnnAlgoCounts before = GetCudnnAlgoCounts();
    deterministic_dw = ConvPass(23);
    const CudnnAlgoCounts after = GetCudnnAlgoCounts();
    EXPECT_GT(after.kept, before.kept) << "the shape was not measured here";
    EXPECT_EQ(after.nondeterministic_kept, before.nondeterministic_kept);
    EXPECT_EQ(after.nondeterministic_fastest, before.nondeterministic_fastest);
  }
  {
    DeterminismScope scope(false);
    const CudnnAlgoCounts before = GetCudnnAlgoCounts();
    const std::vector<float> dw = ConvPass(23);  // same shape, measured again: the key differs
    const CudnnAlgoCounts after = GetCudnnAlgoCounts();
    // Backward-filter ALGO_0 and ALGO_3 and backward-data ALGO_0 sum with atomics.
    EXPECT_GT(after.nondeterministic_kept, before.nondeterministic_kept);
    std::printf(
        "non-deterministic algorithms kept: %lld, fastest in %lld of 3 directions\n",
        static_cast<long long>(after.nondeterministic_kept - before.nondeterministic_kept),
        static_cast<long long>(after.nondeterministic_fastest - before.nondeterministic_fastest));
    ExpectNear(deterministic_dw, dw, 1e-4f, "weight gradient, non-deterministic algorithms");
  }
}

#else  // !PSTRAIN_HAVE_CUDA

TEST(GpuCudaGraph, ReplayedIterationsGiveTheEagerWeightsBitForBit) { PSTRAIN_SKIP_WITHOUT_GPU(); }
TEST(GpuCudnnAlgos, NondeterministicAlgorithmsAreKeptOnlyWhenAllowed) {
  PSTRAIN_SKIP_WITHOUT_GPU();
}

#endif  // PSTRAIN_HAVE_CUDA

}  // namespace
}  // namespace pstrain::testing

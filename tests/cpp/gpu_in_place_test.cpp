// In-place layers on the GPU engine, as ResNet-50 runs them: Convolution,
// then BatchNorm, Scale, ReLU and Dropout all writing their bottom blob, then
// InnerProduct and a loss. Two TRAIN passes (running statistics move, dropout
// masks differ per pass) and a TEST pass on the learned statistics: the loss,
// the shared blob, every parameter's data and gradient and the input's
// gradient equal the CPU engine's within float tolerance; with BatchNorm,
// Scale and ReLU apart and fused (Net::FuseLayers) on both engines. Skipped
// without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tests/cpp/gpu_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"

namespace pstrain::testing {
namespace {

constexpr float kTolerance = 1e-4f;

constexpr char kNet[] = R"(name: "in_place"
force_backward: true
layer { name: "data" type: "DummyData" top: "x" top: "t"
        dummy_data_param { shape { dim: 4 dim: 3 dim: 8 dim: 8 } shape { dim: 4 dim: 5 }
                           data_filler { type: "gaussian" std: 1 }
                           data_filler { type: "gaussian" std: 1 } } }
layer { name: "conv" type: "Convolution" bottom: "x" top: "c"
        convolution_param { num_output: 6 kernel_size: 3 pad: 1 bias_term: false
                            weight_filler { type: "gaussian" std: 0.2 } } }
layer { name: "bn" type: "BatchNorm" bottom: "c" top: "c"
        batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale" type: "Scale" bottom: "c" top: "c"
        scale_param { bias_term: true filler { type: "gaussian" std: 0.5 }
                      bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }
layer { name: "drop" type: "Dropout" bottom: "c" top: "c" dropout_param { dropout_ratio: 0.3 } }
layer { name: "ip" type: "InnerProduct" bottom: "c" top: "y"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "loss" }
)";

std::unique_ptr<Net> Build(Engine engine, caffe::Phase phase, bool fuse) {
  NetOptions options;
  options.context.engine = engine;
  options.state.set_phase(phase);
  options.fuse_layers = fuse;
  return BuildNet(kNet, options);
}

void ExpectSameNets(const Net& cpu, const Net& gpu, const std::string& when) {
  for (const char* name : {"x", "c", "y"}) {
    ExpectNear(DataOf(*cpu.blob_by_name(name)), DataOf(*gpu.blob_by_name(name)), kTolerance,
               when + ": data of " + name);
  }
  const auto& cp = cpu.learnable_params();
  const auto& gp = gpu.learnable_params();
  ASSERT_EQ(cp.size(), gp.size());
  for (size_t i = 0; i < cp.size(); ++i) {
    ExpectNear(DataOf(*cp[i].blob), DataOf(*gp[i].blob), kTolerance, when + ": " + cp[i].name);
  }
}

// `fuse`: BatchNorm, Scale and ReLU fused on both engines, or all apart.
void ExpectGpuMatchesCpu(bool fuse) {
  auto cpu = Build(Engine::kFast, caffe::TRAIN, fuse);
  auto gpu = Build(Engine::kGpu, caffe::TRAIN, fuse);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  // Each in-place layer runs its engine's path: on the GPU "gpu", or
  // "gpu-fused" for BatchNorm, Scale and ReLU when fused (the ReLU included:
  // apart it would give the same answers); on the CPU "fused" then.
  for (const char* layer : {"bn", "scale", "relu"}) {
    EXPECT_EQ(gpu->layer_by_name(layer)->Implementation(), fuse ? "gpu-fused" : "gpu") << layer;
    EXPECT_EQ(cpu->layer_by_name(layer)->Implementation() == "fused", fuse) << layer;
  }
  EXPECT_EQ(gpu->layer_by_name("drop")->Implementation(), "gpu");
  for (const char* layer : {"conv", "ip", "loss"}) {
    EXPECT_TRUE(gpu->layer_by_name(layer)->HasGpuPath()) << layer;
  }
  caffe::NetParameter weights;
  cpu->ToProto(&weights);
  ASSERT_TRUE(gpu->CopyTrainedLayersFrom(weights, "the CPU net").ok());
  // "c" is one blob from the convolution to the InnerProduct.
  EXPECT_EQ(gpu->top_vecs()[2][0], gpu->bottom_vecs()[2][0]);

  for (int pass = 0; pass < 2; ++pass) {
    const std::string when = "pass " + std::to_string(pass);
    cpu->ClearParamDiffs();
    gpu->ClearParamDiffs();
    const float cpu_loss = cpu->ForwardBackward();
    const float gpu_loss = gpu->ForwardBackward();
    ASSERT_TRUE(gpu->RuntimeStatus().ok()) << gpu->RuntimeStatus().message();
    EXPECT_NEAR(gpu_loss, cpu_loss, kTolerance * std::max(1.f, std::fabs(cpu_loss))) << when;
    ExpectSameNets(*cpu, *gpu, when);
    ExpectNear(DiffOf(*cpu->blob_by_name("x")), DiffOf(*gpu->blob_by_name("x")), kTolerance,
               when + ": gradient of the input");
    const auto& cp = cpu->learnable_params();
    const auto& gp = gpu->learnable_params();
    for (size_t i = 0; i < cp.size(); ++i) {
      ExpectNear(DiffOf(*cp[i].blob), DiffOf(*gp[i].blob), kTolerance,
                 when + ": gradient of " + cp[i].name);
    }
  }

  // TEST phase on each engine's learned running statistics.
  auto cpu_test = Build(Engine::kFast, caffe::TEST, fuse);
  auto gpu_test = Build(Engine::kGpu, caffe::TEST, fuse);
  ASSERT_NE(cpu_test, nullptr);
  ASSERT_NE(gpu_test, nullptr);
  caffe::NetParameter cpu_learned, gpu_learned;
  cpu->ToProto(&cpu_learned);
  gpu->ToProto(&gpu_learned);
  ASSERT_TRUE(cpu_test->CopyTrainedLayersFrom(cpu_learned, "cpu").ok());
  ASSERT_TRUE(gpu_test->CopyTrainedLayersFrom(gpu_learned, "gpu").ok());
  const float cpu_loss = cpu_test->Forward();
  const float gpu_loss = gpu_test->Forward();
  EXPECT_NEAR(gpu_loss, cpu_loss, kTolerance * std::max(1.f, std::fabs(cpu_loss)));
  ExpectSameNets(*cpu_test, *gpu_test, "test phase");
}

TEST(GpuInPlaceTest, BatchNormScaleReluDropoutMatchCpu) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  ExpectGpuMatchesCpu(false);
}

TEST(GpuInPlaceTest, FusedBatchNormScaleReluMatchCpu) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  ExpectGpuMatchesCpu(true);
}

}  // namespace
}  // namespace pstrain::testing

// DeviceGradients (worker/ps/device_gradients.hpp) on a real device: the
// copies to pinned memory hold exactly what each blob's diff holds, wherever
// its current values live — written on the device, still on the host (zeroed
// there, or a layer that ran no backward: the upload must come before the
// copy), or never touched — and, through a whole net, the CPU engine's
// gradient sums. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tests/cpp/gpu_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/ps/device_gradients.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include "common/cuda/gpu_context.hpp"
#include "common/cuda/math_gpu.hpp"

namespace pstrain::testing {
namespace {

// Drains every started group, collecting each id's copied gradient.
std::map<int, std::vector<float>> DrainAll(DeviceGradients& gradients,
                                           const std::vector<Blob*>& blobs) {
  std::map<int, std::vector<float>> got;
  const Status s = gradients.Drain(
      true, [&](const std::vector<int>& ids, const std::vector<const float*>& diffs) {
        EXPECT_EQ(ids.size(), diffs.size());
        for (size_t k = 0; k < ids.size(); ++k) {
          const Blob* blob = blobs[static_cast<size_t>(ids[k])];
          got[ids[k]].assign(diffs[k], diffs[k] + blob->count());
        }
        return Status::Ok();
      });
  EXPECT_TRUE(s.ok()) << s.message();
  return got;
}

TEST(GpuDeviceGradientsTest, CopiesDiffsWhereverTheyLive) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  constexpr int kBig = 1 << 22;  // 16 MiB: an upload long enough to race with the copy
  Blob on_device({1000});
  Blob on_host({kBig});
  Blob untouched({333});
  // on_device: written by a kernel; the host copy is stale.
  GpuSet(on_device.count(), 3.f, on_device.mutable_gpu_diff());
  // on_host: the device buffer holds 99s, then the host is written (as
  // ClearParamDiffs does on iteration 0): only an upload makes the device current.
  GpuSet(on_host.count(), 99.f, on_host.mutable_gpu_diff());
  float* host = on_host.mutable_cpu_diff();
  std::vector<float> expected_host(kBig);
  for (int i = 0; i < kBig; ++i) expected_host[i] = host[i] = 0.5f * static_cast<float>(i % 1000);

  const std::vector<Blob*> blobs = {&on_device, &on_host, &untouched};
  auto created = DeviceGradients::Create(blobs);
  ASSERT_TRUE(created.ok()) << created.status().message();
  DeviceGradients& gradients = *created.value();
  // Work queued ahead on the compute stream, as a backward pass would be.
  Blob busy({kBig});
  for (int r = 0; r < 20; ++r) GpuSet(busy.count(), static_cast<float>(r), busy.mutable_gpu_data());
  gradients.Start({0});
  gradients.Start({1, 2});
  auto got = DrainAll(gradients, blobs);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], std::vector<float>(1000, 3.f));
  int wrong = 0;
  for (int i = 0; i < kBig; ++i) wrong += got[1][static_cast<size_t>(i)] != expected_host[i];
  EXPECT_EQ(wrong, 0) << "elements of the host-resident diff copied stale";
  EXPECT_EQ(got[2], std::vector<float>(333, 0.f));

  // Again with the same buffers and events: the new values, nothing left over.
  GpuSet(on_host.count(), 5.f, on_host.mutable_gpu_diff());
  gradients.Start({1});
  got = DrainAll(gradients, blobs);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[1], std::vector<float>(kBig, 5.f));
}

constexpr char kNet[] = R"(name: "grads"
layer { name: "data" type: "DummyData" top: "x" top: "label"
        dummy_data_param { shape { dim: 8 dim: 20 } shape { dim: 8 }
                           data_filler { type: "gaussian" std: 1 }
                           data_filler { type: "constant" value: 2 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
        inner_product_param { num_output: 16 weight_filler { type: "gaussian" std: 0.3 }
                              bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "side" type: "InnerProduct" bottom: "x" top: "side"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" }
)";

// Two passes whose gradients add up (iter_size 2); the copies start after
// each layer's backward in the second pass, as PsWorker starts them. The
// "side" layer learns (lr_mult 1) but feeds no loss: it runs no backward, and
// its diff, zeroed on the host, must arrive as zeros although its device
// buffer held other values.
TEST(GpuDeviceGradientsTest, NetGradientsEqualTheCpuSums) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  NetOptions cpu_options;
  cpu_options.context.engine = Engine::kFast;
  NetOptions gpu_options;
  gpu_options.context.engine = Engine::kGpu;
  auto cpu = BuildNet(kNet, cpu_options);
  auto gpu = BuildNet(kNet, gpu_options);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  caffe::NetParameter weights;
  cpu->ToProto(&weights);
  ASSERT_TRUE(gpu->CopyTrainedLayersFrom(weights, "the CPU net").ok());
  for (size_t i = 0; i < gpu->layers().size(); ++i) {
    if (gpu->layers()[i]->name() == "side") {
      EXPECT_FALSE(gpu->layer_need_backward(static_cast<int>(i)));
    }
  }

  cpu->ClearParamDiffs();
  for (int pass = 0; pass < 2; ++pass) cpu->ForwardBackward();

  const auto& params = gpu->learnable_params();
  std::vector<Blob*> blobs;
  for (const auto& p : params) blobs.push_back(p.blob);
  auto created = DeviceGradients::Create(blobs);
  ASSERT_TRUE(created.ok()) << created.status().message();
  gpu->ClearParamDiffs();
  Blob* side = gpu->layer_by_name("side")->blobs()[0].get();
  GpuSet(side->count(), 99.f, side->mutable_gpu_diff());
  std::fill(side->mutable_cpu_diff(), side->mutable_cpu_diff() + side->count(), 0.f);
  gpu->Forward();
  gpu->Backward();
  gpu->Forward();
  int started = 0;
  gpu->Backward([&](int layer) {
    std::vector<int> ids;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].layer_index == layer) ids.push_back(static_cast<int>(i));
    }
    if (ids.empty()) return;
    created.value()->Start(ids);
    started += static_cast<int>(ids.size());
  });
  EXPECT_EQ(started, static_cast<int>(params.size()));
  auto got = DrainAll(*created.value(), blobs);
  ASSERT_EQ(got.size(), params.size());
  const auto& cpu_params = cpu->learnable_params();
  for (size_t i = 0; i < params.size(); ++i) {
    ExpectNear(DiffOf(*cpu_params[i].blob), got[static_cast<int>(i)], 1e-4f,
               "gradient of " + params[i].name);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].blob == side) {
      EXPECT_EQ(got[static_cast<int>(i)], std::vector<float>(side->count(), 0.f));
    }
  }
}

}  // namespace
}  // namespace pstrain::testing

#endif  // PSTRAIN_HAVE_CUDA

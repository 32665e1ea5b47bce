// Each rule's GPU kernel (UpdateRule::ApplyOnDevice) against its CPU rule:
// every registered rule with a kernel, L2 and L1 decay,
// gradient scaling and per-parameter multipliers, several steps; weights,
// update values and every history array must be equal bit for bit. Skipped
// without a CUDA device; compiled only in CUDA builds.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/optim/update_rule.hpp"
#include "common/rng.hpp"
#include "tests/cpp/layer_test_util.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/cuda/cuda_check.hpp"

namespace pstrain::optim {
namespace {

// n floats of device memory, freed at scope exit.
class DeviceFloats {
 public:
  explicit DeviceFloats(const std::vector<float>& host) : n_(host.size()) {
    PSTRAIN_CUDA_CHECK(cudaMalloc(&ptr_, n_ * sizeof(float)));
    PSTRAIN_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~DeviceFloats() { cudaFree(ptr_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* get() const { return static_cast<float*>(ptr_); }
  void Upload(const std::vector<float>& host) {
    PSTRAIN_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice));
  }
  std::vector<float> Download() const {
    std::vector<float> host(n_);
    PSTRAIN_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, n_ * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t n_;
};

std::vector<float> Random(size_t n, Rng& rng, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * rng.Uniform(-1.f, 1.f);
  v[0] = 0.f;  // the L1 sign of zero
  return v;
}

void ExpectSame(const std::vector<float>& cpu, const std::vector<float>& gpu,
                const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size());
  int mismatches = 0;
  for (size_t i = 0; i < cpu.size() && mismatches < 5; ++i) {
    if (cpu[i] != gpu[i]) {
      ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << " gpu " << gpu[i];
      ++mismatches;
    }
  }
}

SolverHyper Hyper(const std::string& type, Regularization reg) {
  SolverHyper h;
  h.type = type;
  h.base_lr = 0.01f;
  h.momentum = type == "Adam" ? 0.9f : (type == "AdaDelta" ? 0.95f : 0.9f);
  if (type == "AdaGrad" || type == "RMSProp") h.momentum = 0.f;
  h.momentum2 = 0.999f;
  h.delta = type == "AdaDelta" ? 1e-6f : 1e-8f;
  h.rms_decay = 0.98f;
  h.weight_decay = 5e-4f;
  h.regularization = reg;
  return h;
}

void RunRule(const std::string& type, Regularization reg) {
  const SolverHyper hyper = Hyper(type, reg);
  auto rule = MakeUpdateRule(hyper);
  ASSERT_TRUE(rule.ok()) << rule.status().message();
  const size_t n = 3001;  // not a multiple of the block size
  const int slots = (*rule)->history_slots();
  Rng rng(17);
  std::vector<float> data = Random(n, rng, 1.f);
  std::vector<std::vector<float>> history(static_cast<size_t>(slots), std::vector<float>(n, 0.f));
  DeviceFloats d_data(data);
  std::vector<std::unique_ptr<DeviceFloats>> d_history;
  std::vector<float*> d_history_ptrs;
  for (int k = 0; k < slots; ++k) {
    d_history.push_back(std::make_unique<DeviceFloats>(history[static_cast<size_t>(k)]));
    d_history_ptrs.push_back(d_history.back()->get());
  }
  const ParamHyper param{2.f, 0.5f};
  for (int iter = 0; iter < 6; ++iter) {
    const std::string step = type + " step " + std::to_string(iter);
    std::vector<float> diff = Random(n, rng, 0.1f);
    DeviceFloats d_diff(diff);
    const StepInputs in{hyper.base_lr, iter, iter % 2 == 0 ? 0.5f : 1.f};
    std::vector<float*> history_ptrs;
    for (auto& h : history) history_ptrs.push_back(h.data());
    (*rule)->Apply(in, param, ParamSlice{data.data(), diff.data(), history_ptrs, n});
    ASSERT_TRUE((*rule)->has_gpu_kernel()) << type;
    (*rule)->ApplyOnDevice(
        in, param, DeviceSlice{d_data.get(), d_diff.get(), d_history_ptrs.data(), n}, nullptr);
    PSTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
    ExpectSame(data, d_data.Download(), step + " data");
    ExpectSame(diff, d_diff.Download(), step + " diff");
    for (int k = 0; k < slots; ++k) {
      ExpectSame(history[static_cast<size_t>(k)], d_history[static_cast<size_t>(k)]->Download(),
                 step + " history " + std::to_string(k));
    }
  }
}

class GpuUpdateRulesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuUpdateRulesTest, EqualsCpuWithL2) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  RunRule(GetParam(), Regularization::kL2);
}

TEST_P(GpuUpdateRulesTest, EqualsCpuWithL1) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  RunRule(GetParam(), Regularization::kL1);
}

INSTANTIATE_TEST_SUITE_P(AllRules, GpuUpdateRulesTest,
                         ::testing::ValuesIn(UpdateRuleRegistry::Global().GpuTypes()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pstrain::optim

#endif  // PSTRAIN_HAVE_CUDA

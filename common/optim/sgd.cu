// SGD's GPU kernel (the CPU rule: sgd.cpp): h = local_rate * g + momentum * h; g = h.
#include "common/optim/update_kernel.cuh"
#include "common/optim/update_rule_registry.hpp"

namespace pstrain::optim::gpu {
namespace {

struct SgdStep {
  float rate;
  float momentum;
  __device__ float operator()(float g, float* h0, float*, int64_t i) const {
    const float h = rate * g + momentum * h0[i];
    h0[i] = h;
    return h;
  }
};

void SgdGpu(const SolverHyper& hyper, const StepInputs&, const LocalStep& local,
            const DeviceSlice& slice, GpuStream stream) {
  LaunchUpdate(local, SgdStep{local.rate, hyper.momentum}, slice, 1, stream);
}

PSTRAIN_REGISTER_GPU_KERNEL("SGD", SgdGpu);

}  // namespace
}  // namespace pstrain::optim::gpu

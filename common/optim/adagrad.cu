// AdaGrad's GPU kernel (the CPU rule: adagrad.cpp):
//   h = g^2 + h;  g = local_rate * (g / (sqrt(h) + delta)).
#include "common/optim/update_kernel.cuh"
#include "common/optim/update_rule_registry.hpp"

namespace pstrain::optim::gpu {
namespace {

struct AdaGradStep {
  float rate;
  float delta;
  __device__ float operator()(float g, float* h0, float*, int64_t i) const {
    const float h = g * g + h0[i];
    h0[i] = h;
    return rate * (g / (sqrtf(h) + delta));
  }
};

void AdaGradGpu(const SolverHyper& hyper, const StepInputs&, const LocalStep& local,
                const DeviceSlice& slice, GpuStream stream) {
  LaunchUpdate(local, AdaGradStep{local.rate, hyper.delta}, slice, 1, stream);
}

PSTRAIN_REGISTER_GPU_KERNEL("AdaGrad", AdaGradGpu);

}  // namespace
}  // namespace pstrain::optim::gpu

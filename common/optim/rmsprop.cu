// RMSProp's GPU kernel (the CPU rule: rmsprop.cpp):
//   h = (1 - rms_decay) * g^2 + rms_decay * h;  g = local_rate * (g / (sqrt(h) + delta)).
#include "common/optim/update_kernel.cuh"
#include "common/optim/update_rule_registry.hpp"

namespace pstrain::optim::gpu {
namespace {

struct RmsPropStep {
  float rate;
  float rms_decay;
  float keep_new;  // 1 - rms_decay
  float delta;
  __device__ float operator()(float g, float* h0, float*, int64_t i) const {
    const float h = keep_new * (g * g) + rms_decay * h0[i];
    h0[i] = h;
    return rate * (g / (sqrtf(h) + delta));
  }
};

void RmsPropGpu(const SolverHyper& hyper, const StepInputs&, const LocalStep& local,
                const DeviceSlice& slice, GpuStream stream) {
  LaunchUpdate(local, RmsPropStep{local.rate, hyper.rms_decay, 1.f - hyper.rms_decay, hyper.delta},
               slice, 1, stream);
}

PSTRAIN_REGISTER_GPU_KERNEL("RMSProp", RmsPropGpu);

}  // namespace
}  // namespace pstrain::optim::gpu

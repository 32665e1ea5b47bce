// AdaDelta's GPU kernel (the CPU rule: adadelta.cpp), h0 the mean squared
// gradient, h1 the mean squared update, decay = momentum:
//   h0 = (1 - m) * g^2 + m * h0;  g = g * sqrt((delta + h1) / (delta + h0));
//   h1 = (1 - m) * g^2 + m * h1;  g = local_rate * g.
#include "common/optim/update_kernel.cuh"
#include "common/optim/update_rule_registry.hpp"

namespace pstrain::optim::gpu {
namespace {

struct AdaDeltaStep {
  float rate;
  float momentum;
  float keep_new;  // 1 - momentum
  float delta;
  __device__ float operator()(float g, float* h0, float* h1, int64_t i) const {
    const float grad_sq = keep_new * (g * g) + momentum * h0[i];
    h0[i] = grad_sq;
    const float update_sq_old = h1[i];
    g = g * sqrtf((delta + update_sq_old) / (delta + grad_sq));
    h1[i] = keep_new * (g * g) + momentum * update_sq_old;
    return rate * g;
  }
};

void AdaDeltaGpu(const SolverHyper& hyper, const StepInputs&, const LocalStep& local,
                 const DeviceSlice& slice, GpuStream stream) {
  LaunchUpdate(local, AdaDeltaStep{local.rate, hyper.momentum, 1.f - hyper.momentum, hyper.delta},
               slice, 2, stream);
}

PSTRAIN_REGISTER_GPU_KERNEL("AdaDelta", AdaDeltaGpu);

}  // namespace
}  // namespace pstrain::optim::gpu

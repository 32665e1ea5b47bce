// Adam's GPU kernel (the CPU rule: adam.cpp), h0 = m, h1 = v:
//   m = (1 - beta1) * g + beta1 * m;  v = (1 - beta2) * g^2 + beta2 * v;
//   g = (local_rate * AdamBiasCorrection) * (m / (sqrt(v) + delta)).
#include "common/optim/adam.hpp"
#include "common/optim/update_kernel.cuh"
#include "common/optim/update_rule_registry.hpp"

namespace pstrain::optim::gpu {
namespace {

struct AdamStep {
  float step;  // local_rate * AdamBiasCorrection(hyper, iter)
  float beta1;
  float keep_new1;  // 1 - beta1
  float beta2;
  float keep_new2;  // 1 - beta2
  float eps_hat;
  __device__ float operator()(float g, float* h0, float* h1, int64_t i) const {
    const float m = keep_new1 * g + beta1 * h0[i];
    const float v = keep_new2 * (g * g) + beta2 * h1[i];
    h0[i] = m;
    h1[i] = v;
    return step * (m / (sqrtf(v) + eps_hat));
  }
};

void AdamGpu(const SolverHyper& hyper, const StepInputs& in, const LocalStep& local,
             const DeviceSlice& slice, GpuStream stream) {
  const float beta1 = hyper.momentum, beta2 = hyper.momentum2;
  const AdamStep step{local.rate * AdamBiasCorrection(hyper, in.iter),
                      beta1,
                      1.f - beta1,
                      beta2,
                      1.f - beta2,
                      hyper.delta};
  LaunchUpdate(local, step, slice, 2, stream);
}

PSTRAIN_REGISTER_GPU_KERNEL("Adam", AdamGpu);

}  // namespace
}  // namespace pstrain::optim::gpu

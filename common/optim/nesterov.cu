// Nesterov's GPU kernel (the CPU rule: nesterov.cpp):
//   h' = local_rate * g + momentum * h;  g = (1 + momentum) * h' + (-momentum) * h.
#include "common/optim/update_kernel.cuh"
#include "common/optim/update_rule_registry.hpp"

namespace pstrain::optim::gpu {
namespace {

struct NesterovStep {
  float rate;
  float momentum;
  float over_step;  // 1 + momentum, rounded on the host as nesterov.cpp does
  __device__ float operator()(float g, float* h0, float*, int64_t i) const {
    const float h_old = h0[i];
    const float h = rate * g + momentum * h_old;
    h0[i] = h;
    return over_step * h + (-momentum) * h_old;
  }
};

void NesterovGpu(const SolverHyper& hyper, const StepInputs&, const LocalStep& local,
                 const DeviceSlice& slice, GpuStream stream) {
  LaunchUpdate(local, NesterovStep{local.rate, hyper.momentum, 1.f + hyper.momentum}, slice, 1,
               stream);
}

PSTRAIN_REGISTER_GPU_KERNEL("Nesterov", NesterovGpu);

}  // namespace
}  // namespace pstrain::optim::gpu

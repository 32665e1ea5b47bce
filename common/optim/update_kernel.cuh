// Internal to common/optim's .cu files: the element loop every rule's GPU
// kernel shares. Per element, as UpdateRule::Apply on the CPU:
//   g = diff * grad_scale (skipped when 1); g += decay * w (L2) or
//   decay * sign(w) (L1) (skipped when 0); g = rule(g, history); diff = g;
//   data = w - g.
// A rule supplies only its step: a functor with
//   __device__ float operator()(float g, float* h0, float* h1, int64_t i) const
// that advances history element i and returns the update value, with the
// float operations of its CPU rule in the same order. The .cu files are
// built with -fmad=false (no contracted multiply-add) and IEEE '/' and
// sqrtf, so each result rounds as on the CPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/math_gpu.hpp"
#include "common/optim/step.hpp"

namespace pstrain::optim::gpu {

template <class Rule>
__global__ void UpdateKernel(LocalStep s, Rule rule, float* data, float* diff, float* h0, float* h1,
                             int64_t n) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const float w = data[i];
    float g = diff[i];
    if (s.grad_scale != 1.f) g *= s.grad_scale;
    if (s.decay != 0.f) {
      if (s.l1) {
        g += s.decay * static_cast<float>((0.f < w) - (w < 0.f));
      } else {
        g += s.decay * w;
      }
    }
    g = rule(g, h0, h1, i);
    diff[i] = g;
    data[i] = w - g;
  }
}

// Queues the kernel of `rule` on `slice` (history[1] only read by rules with
// two history slots).
template <class Rule>
void LaunchUpdate(const LocalStep& s, const Rule& rule, const DeviceSlice& slice, int slots,
                  GpuStream stream) {
  const auto n = static_cast<int64_t>(slice.n);
  float* h0 = slice.history[0];
  float* h1 = slots > 1 ? slice.history[1] : nullptr;
  UpdateKernel<Rule>
      <<<CudaBlocks(n), kCudaThreads, 0, stream>>>(s, rule, slice.data, slice.diff, h0, h1, n);
  PSTRAIN_CUDA_KERNEL_CHECK();
}

}  // namespace pstrain::optim::gpu

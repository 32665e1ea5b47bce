// Internal to common/cuda: the launchers of the update-rule kernels
// (update_rules.cu) and the host-computed scalars they take. Plain C++17 so
// that nvcc compiles it; update_rules_gpu.cpp fills UpdateScalars.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pstrain::optim::gpu {

enum class RuleKind { kSgd, kNesterov, kAdaGrad, kRmsProp, kAdaDelta, kAdam };

struct UpdateScalars {
  float grad_scale;   // 1: no multiply
  float local_decay;  // 0: no regularization
  bool l1;            // L1 (sign) instead of L2 decay
  float local_rate;   // rate * lr_mult; Adam: local_rate * correction
  float a;            // SGD/Nesterov/AdaDelta: momentum; RMSProp: rms_decay; Adam: beta1
  float b;            // Nesterov: 1 + momentum; RMSProp/AdaDelta: 1 - decay; Adam: 1 - beta1
  float c;            // Adam: beta2
  float d;            // Adam: 1 - beta2
  float delta;        // AdaGrad/RMSProp/AdaDelta/Adam epsilon
};

// REQUIRES: h1 non-null for kAdaDelta and kAdam.
void LaunchUpdate(RuleKind kind, const UpdateScalars& s, float* data, float* diff, float* h0,
                  float* h1, int64_t n, cudaStream_t stream);

// *sum += sum of x[i]^2, accumulated in double (order differs from the CPU's
// SumSquares, so the result agrees to rounding, not bit for bit).
// REQUIRES: sum is device memory; blockDim kCudaThreads is a power of two.
void LaunchAddSumSquares(const float* x, int64_t n, double* sum, cudaStream_t stream);

}  // namespace pstrain::optim::gpu

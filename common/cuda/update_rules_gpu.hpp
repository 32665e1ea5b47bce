// GPU versions of the common/optim update rules (CUDA builds only).
//
// ApplyUpdateGpu does on device pointers exactly what UpdateRule::Apply does
// on the CPU: per element diff *= grad_scale (skipped when 1), regularize
// (L2 or L1, skipped when the local decay is 0), the rule's update with its
// history, data -= diff; diff is left holding the update value. The scalars
// (local rate and decay, Adam's bias correction in double) are computed on
// the host exactly as the CPU rules compute them, and the kernels are built
// with -fmad=false and IEEE division and square root, so the results equal
// the CPU's bit for bit (the CPU build does not contract a*b+c: ISO C++
// mode, no -ffast-math).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "common/optim/update_rule.hpp"

namespace pstrain::optim {

// One solver step of rule `type` (a kSolverTypes name) on n floats, queued on
// `stream`. history holds the rule's history_slots() device arrays (SGD,
// Nesterov, AdaGrad, RMSProp: 1; AdaDelta, Adam: 2).
// REQUIRES: ValidateSolverHyper(hyper).ok() and hyper.type == type; every
// pointer is device memory of n floats on the current device; no overlap.
void ApplyUpdateGpu(const std::string& type, const SolverHyper& hyper, const StepInputs& in,
                    const ParamHyper& param, float* data, float* diff, float* const* history,
                    size_t n, cudaStream_t stream);

// *device_sum += SumSquares(x, n) (update_rule.hpp), summed in double on the
// device and queued on `stream`: the clipping norm without downloading the
// gradients. Agrees with the CPU sum to rounding (another order of addition).
// REQUIRES: x holds n floats and device_sum one double, both device memory.
void AddSumSquaresGpu(const float* x, size_t n, double* device_sum, cudaStream_t stream);

}  // namespace pstrain::optim

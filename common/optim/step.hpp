// The inputs of one solver step on one parameter, and the signature of a
// rule's GPU kernel. Plain C++17 (no std::span), so that a rule's .cu file
// (compiled by nvcc at C++17) includes it beside the rule's registry.
#pragma once

#include <cstddef>

#include "common/optim/solver_hyper.hpp"

struct CUstream_st;  // cudaStream_t is CUstream_st*: no CUDA header needed here

namespace pstrain::optim {

// Per-parameter multipliers (Caffe's ParamSpec lr_mult / decay_mult).
struct ParamHyper {
  float lr_mult = 1.f;
  float decay_mult = 1.f;
};

struct StepInputs {
  float rate;  // LearningRate(hyper, iter)
  int iter;    // the solver's iteration count BEFORE this step (Adam: t = iter + 1)
  // ClipScale(...) / iter_size; 1 leaves the diff untouched. Caffe multiplies
  // twice (clip, then 1 / iter_size) when both apply; one multiply may differ
  // from that by an ulp.
  float grad_scale;
  // False: the caller discards the diff after the step (the parameter
  // server's received frames), so a fused rule may leave it as it is instead
  // of storing the update into it. Weights and history are the same floats
  // either way.
  bool diff_holds_update = true;
};

// The scalars every rule's step starts from, computed once on the host for
// both devices (so the CPU and GPU kernels see the same floats).
struct LocalStep {
  float grad_scale;  // StepInputs::grad_scale (1: no multiply)
  float rate;        // rate * lr_mult
  float decay;       // weight_decay * decay_mult (0: no regularization)
  bool l1;           // L1 (decay * sign(w)) instead of L2 (decay * w)
};

inline LocalStep LocalStepOf(const SolverHyper& hyper, const StepInputs& in,
                             const ParamHyper& param) {
  return LocalStep{in.grad_scale, in.rate * param.lr_mult, hyper.weight_decay * param.decay_mult,
                   hyper.regularization == Regularization::kL1};
}

using GpuStream = CUstream_st*;

// A slice of one parameter in device memory (UpdateRule::ApplyOnDevice).
struct DeviceSlice {
  float* data;
  float* diff;
  float* const* history;  // a host array of the rule's history_slots() device pointers
  size_t n;
};

// A rule's GPU kernel: UpdateRule::Apply on device memory, queued on
// `stream`, with the same float operations per element in the same order
// (built with -fmad=false and IEEE division and square root), so the results
// equal the CPU's bit for bit.
// REQUIRES: n > 0; every array is device memory of the current device.
using GpuKernel = void (*)(const SolverHyper& hyper, const StepInputs& in, const LocalStep& local,
                           const DeviceSlice& slice, GpuStream stream);

}  // namespace pstrain::optim

// UpdateRule: one Caffe solver step applied to a slice of one parameter.
//
// A slice is any contiguous range of a parameter's floats together with the
// same range of its history arrays (momentum, Adam moments, ...). Every rule is
// an element-wise pure function of (StepInputs, ParamHyper, the slice), so a
// parameter-server shard may apply it to the chunks it owns and a
// single-process trainer to whole parameters: both give the same floats.
//
// One global step, as Caffe's SGDSolver::ApplyUpdate does it:
//   1. clip  = ClipScale(sum of SumSquares(diff) over ALL parameters (every
//              shard's partial sum), hyper.clip_gradients)
//   2. rate  = LearningRate(hyper, iter)
//   3. for every slice: rule.Apply({rate, iter, clip / iter_size}, ...)
//   4. iter += 1
// Each rule is common/optim/<rule>.cpp (its UpdateRule) beside <rule>.cu (its
// GPU kernel), both registered under Caffe's type name
// (update_rule_registry.hpp); the scalars both start from (LocalStepOf)
// exist once, in step.hpp.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "common/optim/solver_hyper.hpp"
#include "common/optim/step.hpp"
#include "common/optim/update_rule_registry.hpp"
#include "common/status.hpp"

namespace pstrain::optim {

// One slice of a parameter. The rule reads and writes `data`, `diff` and every
// history array in place; it owns none of them.
struct ParamSlice {
  float* data;                      // n weights
  float* diff;                      // n raw gradients (summed over iter_size); clobbered
  std::span<float* const> history;  // history_slots() arrays of n floats, zero at start
  size_t n;
};

class UpdateRule {
 public:
  explicit UpdateRule(const SolverHyper& hyper);
  virtual ~UpdateRule();
  UpdateRule(const UpdateRule&) = delete;
  UpdateRule& operator=(const UpdateRule&) = delete;

  virtual const char* type() const = 0;  // Caffe's solver type name
  virtual int history_slots() const = 0;

  // One Caffe step on `slice`: diff *= grad_scale; regularize (L2: diff +=
  // local_decay * data, L1: diff += local_decay * sign(data), local_decay =
  // weight_decay * decay_mult, skipped when 0); turn diff into the update value
  // using the history and local_rate = rate * lr_mult; data -= diff.
  // On return diff holds the update value that was subtracted.
  // REQUIRES: slice.history.size() == history_slots(); the arrays do not overlap.
  void Apply(const StepInputs& in, const ParamHyper& param, ParamSlice slice) const;

  // True when the rule registered a GPU kernel (common/optim/<rule>.cu).
  bool has_gpu_kernel() const { return gpu_kernel_ != nullptr; }
  // Apply on device memory, queued on `stream`: the same floats as Apply.
  // Nothing is queued for an empty slice.
  // REQUIRES: has_gpu_kernel() (CheckGpuKernel at job start); the arrays are
  // device memory of the current device, slice.history has history_slots().
  void ApplyOnDevice(const StepInputs& in, const ParamHyper& param, const DeviceSlice& slice,
                     GpuStream stream) const;

 protected:
  // Replaces slice.diff (already scaled and regularized) by the update value
  // and advances the history.
  virtual void ComputeUpdate(const StepInputs& in, float local_rate,
                             const ParamSlice& slice) const = 0;
  // Optionally the whole of Apply in one pass over memory (the same float
  // operations per element, in the same order, so the result is identical).
  // Returns false when the rule has no fused form.
  virtual bool ApplyFused(const StepInputs& /*in*/, float /*local_rate*/, float /*local_decay*/,
                          const ParamSlice& /*slice*/) const {
    return false;
  }
  const SolverHyper& hyper() const { return hyper_; }
  Regularization regularization() const { return hyper_.regularization; }

 private:
  friend Result<std::unique_ptr<UpdateRule>> MakeUpdateRule(const SolverHyper& hyper);

  SolverHyper hyper_;
  GpuKernel gpu_kernel_ = nullptr;  // set by MakeUpdateRule from the registry
};

// The rule registered under hyper.type (update_rule_registry.hpp), with its
// GPU kernel when it has one. Fails when hyper is not valid
// (ValidateSolverHyper's message).
Result<std::unique_ptr<UpdateRule>> MakeUpdateRule(const SolverHyper& hyper);

// Sum of diff[i]^2 in double: a partial squared L2 norm that shards add up.
double SumSquares(const float* diff, size_t n);

// Caffe's ClipGradients factor: with clip_gradients >= 0 and the global L2
// norm sqrt(global_sum_squares) above it, clip_gradients / norm; otherwise 1.
// (As in Caffe, clip_gradients < 0 is off and 0 zeroes every nonzero gradient.)
float ClipScale(double global_sum_squares, float clip_gradients);

}  // namespace pstrain::optim

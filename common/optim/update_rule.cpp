#include "common/optim/update_rule.hpp"

#include <cmath>

namespace pstrain::optim {

UpdateRule::UpdateRule(const SolverHyper& hyper) : hyper_(hyper) {}

UpdateRule::~UpdateRule() = default;

void UpdateRule::Apply(const StepInputs& in, const ParamHyper& param, ParamSlice s) const {
  PSTRAIN_CHECK(s.history.size() == static_cast<size_t>(history_slots()));
  const LocalStep local = LocalStepOf(hyper_, in, param);
  if (ApplyFused(in, local.rate, local.decay, s)) return;
  // Normalize (and clip): Caffe skips the multiply when there is nothing to do.
  if (local.grad_scale != 1.f) {
    for (size_t i = 0; i < s.n; ++i) s.diff[i] *= local.grad_scale;
  }
  if (local.decay != 0.f) {
    if (!local.l1) {
      for (size_t i = 0; i < s.n; ++i) s.diff[i] += local.decay * s.data[i];
    } else {
      for (size_t i = 0; i < s.n; ++i) {
        const float sign = static_cast<float>((0.f < s.data[i]) - (s.data[i] < 0.f));
        s.diff[i] += local.decay * sign;
      }
    }
  }
  ComputeUpdate(in, local.rate, s);
  for (size_t i = 0; i < s.n; ++i) s.data[i] -= s.diff[i];
}

void UpdateRule::ApplyOnDevice(const StepInputs& in, const ParamHyper& param,
                               const DeviceSlice& slice, GpuStream stream) const {
  PSTRAIN_CHECK_MSG(gpu_kernel_ != nullptr,
                    std::string("ApplyOnDevice: rule ") + type() + " has no GPU kernel");
  if (slice.n == 0) return;
  gpu_kernel_(hyper_, in, LocalStepOf(hyper_, in, param), slice, stream);
}

Result<std::unique_ptr<UpdateRule>> MakeUpdateRule(const SolverHyper& hyper) {
  PSTRAIN_RETURN_IF_ERROR(ValidateSolverHyper(hyper));
  const auto entry = UpdateRuleRegistry::Global().Find(hyper.type);
  if (!entry) {
    return Status::InvalidArgument("type: no update rule registered for \"" + hyper.type + "\"");
  }
  std::unique_ptr<UpdateRule> rule = entry->make(hyper);
  rule->gpu_kernel_ = entry->gpu;
  return rule;
}

double SumSquares(const float* diff, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += double{diff[i]} * double{diff[i]};
  return sum;
}

float ClipScale(double global_sum_squares, float clip_gradients) {
  if (clip_gradients < 0.f) return 1.f;
  // Caffe sums and takes the root in float.
  const float l2norm = std::sqrt(static_cast<float>(global_sum_squares));
  if (l2norm > clip_gradients) return clip_gradients / l2norm;
  return 1.f;
}

}  // namespace pstrain::optim

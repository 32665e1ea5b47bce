#include "common/optim/update_rule.hpp"

#include <cmath>
#include <string_view>

#include "common/optim/rules.hpp"

namespace pstrain::optim {
namespace {

struct RegisteredRule {
  std::string_view type;
  std::unique_ptr<UpdateRule> (*make)(const SolverHyper&);
};

// The registry: one line per rule; the names are kSolverTypes.
constexpr RegisteredRule kRegistry[] = {
    {"SGD", &rules::MakeSgd},           {"Nesterov", &rules::MakeNesterov},
    {"AdaGrad", &rules::MakeAdaGrad},   {"RMSProp", &rules::MakeRmsProp},
    {"AdaDelta", &rules::MakeAdaDelta}, {"Adam", &rules::MakeAdam},
};
static_assert(std::size(kRegistry) == kSolverTypes.size());

}  // namespace

UpdateRule::UpdateRule(const SolverHyper& hyper)
    : weight_decay_(hyper.weight_decay), regularization_(hyper.regularization) {}

UpdateRule::~UpdateRule() = default;

void UpdateRule::Apply(const StepInputs& in, const ParamHyper& param, ParamSlice s) const {
  PSTRAIN_CHECK(s.history.size() == static_cast<size_t>(history_slots()));
  if (ApplyFused(in, in.rate * param.lr_mult, weight_decay_ * param.decay_mult, s)) return;
  // Normalize (and clip): Caffe skips the multiply when there is nothing to do.
  if (in.grad_scale != 1.f) {
    for (size_t i = 0; i < s.n; ++i) s.diff[i] *= in.grad_scale;
  }
  const float local_decay = weight_decay_ * param.decay_mult;
  if (local_decay != 0.f) {
    if (regularization_ == Regularization::kL2) {
      for (size_t i = 0; i < s.n; ++i) s.diff[i] += local_decay * s.data[i];
    } else {
      for (size_t i = 0; i < s.n; ++i) {
        const float sign = static_cast<float>((0.f < s.data[i]) - (s.data[i] < 0.f));
        s.diff[i] += local_decay * sign;
      }
    }
  }
  ComputeUpdate(in, in.rate * param.lr_mult, s);
  for (size_t i = 0; i < s.n; ++i) s.data[i] -= s.diff[i];
}

Result<std::unique_ptr<UpdateRule>> MakeUpdateRule(const SolverHyper& hyper) {
  PSTRAIN_RETURN_IF_ERROR(ValidateSolverHyper(hyper));
  for (const RegisteredRule& rule : kRegistry) {
    if (rule.type == hyper.type) return rule.make(hyper);
  }
  return Status::Error("type: no update rule registered for \"" + hyper.type + "\"");
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

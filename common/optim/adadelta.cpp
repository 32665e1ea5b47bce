// Caffe's AdaDeltaSolver::ComputeUpdateValue, with history[0] the mean squared
// gradient and history[1] the mean squared update (decay = momentum):
//   h0 = (1 - m) * g^2 + m * h0
//   g  = g * sqrt((h1 + delta) / (h0 + delta))
//   h1 = (1 - m) * g^2 + m * h1
//   g  = local_rate * g
#include <cmath>

#include "common/optim/update_rule.hpp"

namespace pstrain::optim {
namespace {

class AdaDeltaRule final : public UpdateRule {
 public:
  explicit AdaDeltaRule(const SolverHyper& h)
      : UpdateRule(h), momentum_(h.momentum), delta_(h.delta) {}
  const char* type() const override { return "AdaDelta"; }
  int history_slots() const override { return 2; }

 protected:
  void ComputeUpdate(const StepInputs&, float local_rate, const ParamSlice& s) const override {
    float* g = s.diff;
    float* grad_sq = s.history[0];
    float* update_sq = s.history[1];
    const float keep_new = 1.f - momentum_;
    for (size_t i = 0; i < s.n; ++i) {
      grad_sq[i] = keep_new * (g[i] * g[i]) + momentum_ * grad_sq[i];
      g[i] = g[i] * std::sqrt((delta_ + update_sq[i]) / (delta_ + grad_sq[i]));
      update_sq[i] = keep_new * (g[i] * g[i]) + momentum_ * update_sq[i];
      g[i] = local_rate * g[i];
    }
  }

 private:
  float momentum_;
  float delta_;
};

PSTRAIN_REGISTER_UPDATE_RULE("AdaDelta", 4, AdaDeltaRule);  // GPU kernel: adadelta.cu

}  // namespace

}  // namespace pstrain::optim

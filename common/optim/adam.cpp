// Caffe's AdamSolver::ComputeUpdateValue, with t = iter + 1, history[0] = m,
// history[1] = v:
//   m = (1 - beta1) * g + beta1 * m
//   v = (1 - beta2) * g^2 + beta2 * v
//   g = (local_rate * correction) * (m / (sqrt(v) + delta)),
//   correction = AdamBiasCorrection (adam.hpp; adam.cu uses the same)
#include "common/optim/adam.hpp"

#include <cmath>

#include "common/optim/update_rule.hpp"

namespace pstrain::optim {
namespace {

class AdamRule final : public UpdateRule {
 public:
  explicit AdamRule(const SolverHyper& h)
      : UpdateRule(h), beta1_(h.momentum), beta2_(h.momentum2), eps_hat_(h.delta) {}
  const char* type() const override { return "Adam"; }
  int history_slots() const override { return 2; }

 protected:
  void ComputeUpdate(const StepInputs& in, float local_rate, const ParamSlice& s) const override {
    const float step = local_rate * AdamBiasCorrection(hyper(), in.iter);
    const float keep_new1 = 1.f - beta1_;
    const float keep_new2 = 1.f - beta2_;
    float* g = s.diff;
    float* m = s.history[0];
    float* v = s.history[1];
    for (size_t i = 0; i < s.n; ++i) {
      m[i] = keep_new1 * g[i] + beta1_ * m[i];
      v[i] = keep_new2 * (g[i] * g[i]) + beta2_ * v[i];
      g[i] = step * (m[i] / (std::sqrt(v[i]) + eps_hat_));
    }
  }

 private:
  float beta1_;
  float beta2_;
  float eps_hat_;
};

PSTRAIN_REGISTER_UPDATE_RULE("Adam", 5, AdamRule);  // GPU kernel: adam.cu

}  // namespace

float AdamBiasCorrection(const SolverHyper& hyper, int iter) {
  const int t = iter + 1;
  return static_cast<float>(std::sqrt(1.0 - std::pow(double{hyper.momentum2}, t)) /
                            (1.0 - std::pow(double{hyper.momentum}, t)));
}

}  // namespace pstrain::optim

// Caffe's AdaGradSolver::ComputeUpdateValue:
//   h = g^2 + h;  g = local_rate * (g / (sqrt(h) + delta)).
#include <cmath>

#include "common/optim/update_rule.hpp"

namespace pstrain::optim {
namespace {

class AdaGradRule final : public UpdateRule {
 public:
  explicit AdaGradRule(const SolverHyper& h) : UpdateRule(h), delta_(h.delta) {}
  const char* type() const override { return "AdaGrad"; }
  int history_slots() const override { return 1; }

 protected:
  void ComputeUpdate(const StepInputs&, float local_rate, const ParamSlice& s) const override {
    float* g = s.diff;
    float* h = s.history[0];
    for (size_t i = 0; i < s.n; ++i) {
      h[i] = g[i] * g[i] + h[i];
      g[i] = local_rate * (g[i] / (std::sqrt(h[i]) + delta_));
    }
  }

 private:
  float delta_;
};

PSTRAIN_REGISTER_UPDATE_RULE("AdaGrad", 2, AdaGradRule);  // GPU kernel: adagrad.cu

}  // namespace

}  // namespace pstrain::optim

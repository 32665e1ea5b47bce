// Caffe's RMSPropSolver::ComputeUpdateValue:
//   h = (1 - rms_decay) * g^2 + rms_decay * h;  g = local_rate * (g / (sqrt(h) + delta)).
#include <cmath>

#include "common/optim/update_rule.hpp"

namespace pstrain::optim {
namespace {

class RmsPropRule final : public UpdateRule {
 public:
  explicit RmsPropRule(const SolverHyper& h)
      : UpdateRule(h), rms_decay_(h.rms_decay), delta_(h.delta) {}
  const char* type() const override { return "RMSProp"; }
  int history_slots() const override { return 1; }

 protected:
  void ComputeUpdate(const StepInputs&, float local_rate, const ParamSlice& s) const override {
    float* g = s.diff;
    float* h = s.history[0];
    const float keep_new = 1.f - rms_decay_;
    for (size_t i = 0; i < s.n; ++i) {
      h[i] = keep_new * (g[i] * g[i]) + rms_decay_ * h[i];
      g[i] = local_rate * (g[i] / (std::sqrt(h[i]) + delta_));
    }
  }

 private:
  float rms_decay_;
  float delta_;
};

PSTRAIN_REGISTER_UPDATE_RULE("RMSProp", 3, RmsPropRule);  // GPU kernel: rmsprop.cu

}  // namespace

}  // namespace pstrain::optim

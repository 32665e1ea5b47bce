// Caffe's NesterovSolver::ComputeUpdateValue:
//   h' = local_rate * g + momentum * h;  g = (1 + momentum) * h' - momentum * h.
#include "common/optim/update_rule.hpp"

namespace pstrain::optim {
namespace {

class NesterovRule final : public UpdateRule {
 public:
  explicit NesterovRule(const SolverHyper& h) : UpdateRule(h), momentum_(h.momentum) {}
  const char* type() const override { return "Nesterov"; }
  int history_slots() const override { return 1; }

 protected:
  void ComputeUpdate(const StepInputs&, float local_rate, const ParamSlice& s) const override {
    float* g = s.diff;
    float* h = s.history[0];
    const float over_step = 1.f + momentum_;
    for (size_t i = 0; i < s.n; ++i) {
      const float h_old = h[i];
      h[i] = local_rate * g[i] + momentum_ * h_old;
      g[i] = over_step * h[i] + (-momentum_) * h_old;
    }
  }

 private:
  float momentum_;
};

PSTRAIN_REGISTER_UPDATE_RULE("Nesterov", 1, NesterovRule);  // GPU kernel: nesterov.cu

}  // namespace

}  // namespace pstrain::optim

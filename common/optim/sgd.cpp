// Caffe's SGDSolver::ComputeUpdateValue: h = local_rate * g + momentum * h; g = h.
#include "common/optim/rules.hpp"

namespace pstrain::optim::rules {
namespace {

class SgdRule final : public UpdateRule {
 public:
  explicit SgdRule(const SolverHyper& h) : UpdateRule(h), momentum_(h.momentum) {}
  const char* type() const override { return "SGD"; }
  int history_slots() const override { return 1; }

 protected:
  void ComputeUpdate(const StepInputs&, float local_rate, const ParamSlice& s) const override {
    float* g = s.diff;
    float* h = s.history[0];
    for (size_t i = 0; i < s.n; ++i) {
      h[i] = local_rate * g[i] + momentum_ * h[i];
      g[i] = h[i];
    }
  }

 private:
  float momentum_;
};

}  // namespace

std::unique_ptr<UpdateRule> MakeSgd(const SolverHyper& hyper) {
  return std::make_unique<SgdRule>(hyper);
}

}  // namespace pstrain::optim::rules

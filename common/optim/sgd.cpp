// Caffe's SGDSolver::ComputeUpdateValue: h = local_rate * g + momentum * h; g = h.
#include "common/optim/update_rule.hpp"

namespace pstrain::optim {
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

  // Scale, decay, momentum and subtract in one pass (the parameter server's
  // hot loop): per element exactly the operations of the unfused path.
  bool ApplyFused(const StepInputs& in, float local_rate, float local_decay,
                  const ParamSlice& s) const override {
    const float scale = in.grad_scale;
    const bool l1 = regularization() == Regularization::kL1;
    float* g = s.diff;
    float* h = s.history[0];
    float* w = s.data;
    if (!in.diff_holds_update && scale == 1.f && local_decay == 0.f) {
      // The parameter server's common case: three streams, no store into g.
      for (size_t i = 0; i < s.n; ++i) {
        const float hi = local_rate * g[i] + momentum_ * h[i];
        h[i] = hi;
        w[i] -= hi;
      }
      return true;
    }
    if (in.diff_holds_update) {
      FusedLoop</*kStoreUpdate=*/true>(s.n, g, h, w, scale, local_rate, local_decay, l1);
    } else {  // four streams: the update is not stored into g
      FusedLoop</*kStoreUpdate=*/false>(s.n, g, h, w, scale, local_rate, local_decay, l1);
    }
    return true;
  }

 private:
  template <bool kStoreUpdate>
  void FusedLoop(size_t n, float* __restrict g, float* __restrict h, float* __restrict w,
                 float scale, float local_rate, float local_decay, bool l1) const {
    const float momentum = momentum_;
    for (size_t i = 0; i < n; ++i) {
      float gi = g[i];
      if (scale != 1.f) gi *= scale;
      if (local_decay != 0.f) {
        if (l1) {
          gi += local_decay * static_cast<float>((0.f < w[i]) - (w[i] < 0.f));
        } else {
          gi += local_decay * w[i];
        }
      }
      const float hi = local_rate * gi + momentum * h[i];
      h[i] = hi;
      if constexpr (kStoreUpdate) g[i] = hi;
      w[i] -= hi;
    }
  }

  float momentum_;
};

PSTRAIN_REGISTER_UPDATE_RULE("SGD", 0, SgdRule);  // GPU kernel: sgd.cu

}  // namespace

}  // namespace pstrain::optim

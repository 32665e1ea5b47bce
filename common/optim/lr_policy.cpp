#include "common/optim/lr_policy.hpp"

#include <algorithm>
#include <cmath>

namespace pstrain::optim {

float LearningRate(const SolverHyper& h, int iter) {
  const std::string& p = h.lr_policy;
  const double base_lr = h.base_lr;
  if (p == "fixed") return h.base_lr;
  if (p == "step") {
    const int current_step = iter / h.stepsize;
    return static_cast<float>(base_lr * std::pow(double{h.gamma}, current_step));
  }
  if (p == "exp") return static_cast<float>(base_lr * std::pow(double{h.gamma}, iter));
  if (p == "inv") {
    const float base = 1.f + h.gamma * static_cast<float>(iter);
    return static_cast<float>(base_lr * std::pow(double{base}, -double{h.power}));
  }
  if (p == "multistep") {
    const auto current_step =
        std::upper_bound(h.stepvalue.begin(), h.stepvalue.end(), iter) - h.stepvalue.begin();
    return static_cast<float>(base_lr * std::pow(double{h.gamma}, static_cast<int>(current_step)));
  }
  if (p == "poly") {
    const float base = 1.f - static_cast<float>(iter) / static_cast<float>(h.max_iter);
    return static_cast<float>(base_lr * std::pow(double{base}, double{h.power}));
  }
  if (p == "sigmoid") {
    const float x = -h.gamma * (static_cast<float>(iter) - static_cast<float>(h.stepsize));
    return static_cast<float>(base_lr * (1.0 / (1.0 + std::exp(double{x}))));
  }
  PSTRAIN_CHECK_MSG(false, "LearningRate: unvalidated lr_policy \"" + p + "\"");
}

}  // namespace pstrain::optim

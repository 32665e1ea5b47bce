#include "common/optim/solver_hyper.hpp"

#include <algorithm>
#include <cstdio>

#include "common/optim/update_rule_registry.hpp"

namespace pstrain::optim {
namespace {

std::string Join(const auto& names) {
  std::string out;
  for (std::string_view name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string Num(double value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", value);
  return buf;
}

bool Contains(const auto& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// True for v in [0, 1); false for NaN.
bool InUnitRange(float v) { return v >= 0.f && v < 1.f; }

Status ValidateLrPolicy(const SolverHyper& h) {
  const std::string& p = h.lr_policy;
  if (!Contains(kLrPolicies, p)) {
    return Status::InvalidArgument("lr_policy: unknown policy \"" + p +
                                   "\"; known policies: " + Join(kLrPolicies));
  }
  if (p != "fixed" && p != "poly" && !(h.gamma >= 0.f)) {
    return Status::InvalidArgument("gamma must be >= 0 for lr_policy \"" + p + "\", got " +
                                   Num(h.gamma));
  }
  if ((p == "step" || p == "sigmoid") && h.stepsize <= 0) {
    return Status::InvalidArgument("stepsize must be > 0 for lr_policy \"" + p + "\", got " +
                                   std::to_string(h.stepsize));
  }
  if (p == "poly" && h.max_iter <= 0) {
    return Status::InvalidArgument("max_iter must be > 0 for lr_policy \"poly\", got " +
                                   std::to_string(h.max_iter));
  }
  if (p == "multistep") {
    for (size_t i = 1; i < h.stepvalue.size(); ++i) {
      if (h.stepvalue[i] <= h.stepvalue[i - 1]) {
        return Status::InvalidArgument("stepvalue must be strictly increasing, but stepvalue[" +
                                       std::to_string(i) + "] = " + std::to_string(h.stepvalue[i]) +
                                       " follows " + std::to_string(h.stepvalue[i - 1]));
      }
    }
  }
  return Status::Ok();
}

Status ValidateTypeSpecific(const SolverHyper& h) {
  const std::string& t = h.type;
  if (t == "AdaGrad" || t == "RMSProp") {
    if (h.momentum != 0.f) {
      return Status::InvalidArgument("momentum must be 0 for solver type \"" + t + "\", got " +
                                     Num(h.momentum));
    }
  } else if (!InUnitRange(h.momentum)) {
    return Status::InvalidArgument("momentum must lie in [0, 1) for solver type \"" + t +
                                   "\", got " + Num(h.momentum));
  }
  if (t == "Adam" && !InUnitRange(h.momentum2)) {
    return Status::InvalidArgument("momentum2 must lie in [0, 1) for solver type \"Adam\", got " +
                                   Num(h.momentum2));
  }
  if (t == "RMSProp" && !InUnitRange(h.rms_decay)) {
    return Status::InvalidArgument(
        "rms_decay must lie in [0, 1) for solver type \"RMSProp\", got " + Num(h.rms_decay));
  }
  if (t != "SGD" && t != "Nesterov" && !(h.delta > 0.f)) {
    return Status::InvalidArgument("delta must be > 0 for solver type \"" + t + "\", got " +
                                   Num(h.delta));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateSolverHyper(const SolverHyper& h) {
  const std::vector<std::string> types = UpdateRuleRegistry::Global().Types();
  if (!Contains(types, h.type)) {
    return Status::InvalidArgument("type: unknown solver type \"" + h.type +
                                   "\"; known types: " + Join(types));
  }
  if (!(h.base_lr >= 0.f)) {
    return Status::InvalidArgument("base_lr must be >= 0, got " + Num(h.base_lr));
  }
  if (!(h.weight_decay >= 0.f)) {
    return Status::InvalidArgument("weight_decay must be >= 0, got " + Num(h.weight_decay));
  }
  if (h.iter_size < 1) {
    return Status::InvalidArgument("iter_size must be >= 1, got " + std::to_string(h.iter_size));
  }
  if (h.max_iter < 0) {
    return Status::InvalidArgument("max_iter must be >= 0, got " + std::to_string(h.max_iter));
  }
  PSTRAIN_RETURN_IF_ERROR(ValidateLrPolicy(h));
  return ValidateTypeSpecific(h);
}

}  // namespace pstrain::optim

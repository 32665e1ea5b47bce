// SolverHyper: the solver settings of one training job, in the meaning of
// Caffe's SolverParameter (only what the update math needs).
//
// common/optim owns the server-side solver math (lr policies and update
// rules); it includes only common/ headers and the standard library.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace pstrain::optim {

enum class Regularization { kL2, kL1 };

// Learning rate policies, exactly as Caffe spells them.
inline constexpr std::array<std::string_view, 7> kLrPolicies = {
    "fixed", "step", "exp", "inv", "multistep", "poly", "sigmoid"};

struct SolverHyper {
  std::string type = "SGD";  // a registered rule (UpdateRuleRegistry::Types())
  float base_lr = 0.f;
  std::string lr_policy = "fixed";  // one of kLrPolicies
  float gamma = 0.f;
  float power = 0.f;
  int stepsize = 0;
  std::vector<int> stepvalue;  // multistep boundaries, strictly increasing
  int max_iter = 0;
  float momentum = 0.f;      // SGD/Nesterov momentum, AdaDelta decay, Adam beta1
  float momentum2 = 0.999f;  // Adam beta2
  float delta = 1e-8f;       // AdaGrad/RMSProp/AdaDelta/Adam epsilon
  float rms_decay = 0.99f;   // RMSProp
  float weight_decay = 0.f;
  Regularization regularization = Regularization::kL2;
  float clip_gradients = -1.f;  // < 0: off
  int iter_size = 1;            // gradients accumulated per step
};

// Ok when `hyper` describes a solver Caffe would run; otherwise an error whose
// message names the offending field, its value and what is allowed.
Status ValidateSolverHyper(const SolverHyper& hyper);

}  // namespace pstrain::optim

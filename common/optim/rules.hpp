// Internal to common/optim: factories of the registered update rules, one
// per source file. REQUIRES for each: ValidateSolverHyper(hyper).ok().
#pragma once

#include <memory>

#include "common/optim/update_rule.hpp"

namespace pstrain::optim::rules {

std::unique_ptr<UpdateRule> MakeSgd(const SolverHyper& hyper);
std::unique_ptr<UpdateRule> MakeNesterov(const SolverHyper& hyper);
std::unique_ptr<UpdateRule> MakeAdaGrad(const SolverHyper& hyper);
std::unique_ptr<UpdateRule> MakeRmsProp(const SolverHyper& hyper);
std::unique_ptr<UpdateRule> MakeAdaDelta(const SolverHyper& hyper);
std::unique_ptr<UpdateRule> MakeAdam(const SolverHyper& hyper);

}  // namespace pstrain::optim::rules

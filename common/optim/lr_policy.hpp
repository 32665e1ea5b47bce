// Learning rate policies of Caffe's SGDSolver::GetLearningRate.
#pragma once

#include "common/optim/solver_hyper.hpp"

namespace pstrain::optim {

// The learning rate of iteration `iter` (the solver's iteration count before
// the step), with Caffe's formulas:
//   fixed:     base_lr
//   step:      base_lr * gamma ^ floor(iter / stepsize)
//   exp:       base_lr * gamma ^ iter
//   inv:       base_lr * (1 + gamma * iter) ^ (-power)
//   multistep: base_lr * gamma ^ (number of stepvalues <= iter)
//   poly:      base_lr * (1 - iter / max_iter) ^ power
//   sigmoid:   base_lr * 1 / (1 + exp(-gamma * (iter - stepsize)))
// Intermediate precision follows Caffe (float operands, pow/exp in double,
// the result rounded to float). Multistep is stateless here, so a resumed job
// gets the same rate as an uninterrupted one.
// REQUIRES: ValidateSolverHyper(hyper).ok(), iter >= 0.
float LearningRate(const SolverHyper& hyper, int iter);

}  // namespace pstrain::optim

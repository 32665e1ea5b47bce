// Adam's bias correction, shared by the CPU rule (adam.cpp) and its GPU
// kernel (adam.cu). Plain C++17.
#pragma once

#include "common/optim/solver_hyper.hpp"

namespace pstrain::optim {

// Caffe's AdamSolver step factor for iteration `iter` (t = iter + 1):
//   sqrt(1 - beta2^t) / (1 - beta1^t), beta1 = hyper.momentum, beta2 = hyper.momentum2,
// computed in double (as Caffe's pow does) and rounded to float once.
float AdamBiasCorrection(const SolverHyper& hyper, int iter);

}  // namespace pstrain::optim

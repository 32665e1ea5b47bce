// Reading SolverHyper from Caffe's SolverParameter (a .prototxt solver file).
#pragma once

#include "common/optim/solver_hyper.hpp"
#include "common/status.hpp"

namespace caffe {
class SolverParameter;
}  // namespace caffe

namespace pstrain::optim {

// The update-math settings of `param`, validated (ValidateSolverHyper). The
// deprecated `solver_type` enum is honoured when `type` is unset, as Caffe's
// UpgradeSolverType does; setting both is an error, as in Caffe.
// `regularization_type` must be "L2" or "L1".
Result<SolverHyper> SolverHyperFromProto(const caffe::SolverParameter& param);

}  // namespace pstrain::optim

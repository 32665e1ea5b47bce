#include "common/optim/solver_proto.hpp"

#include "proto/caffe.pb.h"

namespace pstrain::optim {
namespace {

Result<std::string> SolverType(const caffe::SolverParameter& p) {
  if (!p.has_solver_type()) return p.type();
  if (p.has_type()) {
    return Status::InvalidArgument(
        "solver_type (deprecated enum) and type (string) cannot both be specified");
  }
  switch (p.solver_type()) {
    case caffe::SolverParameter::SGD:
      return std::string("SGD");
    case caffe::SolverParameter::NESTEROV:
      return std::string("Nesterov");
    case caffe::SolverParameter::ADAGRAD:
      return std::string("AdaGrad");
    case caffe::SolverParameter::RMSPROP:
      return std::string("RMSProp");
    case caffe::SolverParameter::ADADELTA:
      return std::string("AdaDelta");
    case caffe::SolverParameter::ADAM:
      return std::string("Adam");
  }
  return Status::InvalidArgument("solver_type: unknown enum value " +
                                 std::to_string(p.solver_type()));
}

Result<Regularization> RegularizationType(const std::string& name) {
  if (name == "L2") return Regularization::kL2;
  if (name == "L1") return Regularization::kL1;
  return Status::InvalidArgument("regularization_type: unknown type \"" + name +
                                 "\"; known types: L2, L1");
}

}  // namespace

Result<SolverHyper> SolverHyperFromProto(const caffe::SolverParameter& p) {
  SolverHyper h;
  PSTRAIN_ASSIGN_OR_RETURN(h.type, SolverType(p));
  h.base_lr = p.base_lr();
  h.lr_policy = p.lr_policy();
  h.gamma = p.gamma();
  h.power = p.power();
  h.stepsize = p.stepsize();
  h.stepvalue.assign(p.stepvalue().begin(), p.stepvalue().end());
  h.max_iter = p.max_iter();
  h.momentum = p.momentum();
  h.momentum2 = p.momentum2();
  h.delta = p.delta();
  h.rms_decay = p.rms_decay();
  h.weight_decay = p.weight_decay();
  PSTRAIN_ASSIGN_OR_RETURN(h.regularization, RegularizationType(p.regularization_type()));
  h.clip_gradients = p.clip_gradients();
  h.iter_size = p.iter_size();
  PSTRAIN_RETURN_IF_ERROR(ValidateSolverHyper(h));
  return h;
}

}  // namespace pstrain::optim

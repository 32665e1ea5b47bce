#include "common/cuda/update_rules_gpu.hpp"

#include <cmath>

#include "common/cuda/update_kernels.hpp"

namespace pstrain::optim {

void ApplyUpdateGpu(const std::string& type, const SolverHyper& hyper, const StepInputs& in,
                    const ParamHyper& param, float* data, float* diff, float* const* history,
                    size_t n, cudaStream_t stream) {
  if (n == 0) return;
  gpu::UpdateScalars s{};
  s.grad_scale = in.grad_scale;
  s.local_decay = hyper.weight_decay * param.decay_mult;
  s.l1 = hyper.regularization == Regularization::kL1;
  s.local_rate = in.rate * param.lr_mult;
  s.delta = hyper.delta;
  gpu::RuleKind kind = gpu::RuleKind::kSgd;
  if (type == "SGD") {
    kind = gpu::RuleKind::kSgd;
    s.a = hyper.momentum;
  } else if (type == "Nesterov") {
    kind = gpu::RuleKind::kNesterov;
    s.a = hyper.momentum;
    s.b = 1.f + hyper.momentum;
  } else if (type == "AdaGrad") {
    kind = gpu::RuleKind::kAdaGrad;
  } else if (type == "RMSProp") {
    kind = gpu::RuleKind::kRmsProp;
    s.a = hyper.rms_decay;
    s.b = 1.f - hyper.rms_decay;
  } else if (type == "AdaDelta") {
    kind = gpu::RuleKind::kAdaDelta;
    s.a = hyper.momentum;
    s.b = 1.f - hyper.momentum;
  } else if (type == "Adam") {
    kind = gpu::RuleKind::kAdam;
    // As adam.cpp: the correction in double, then one float multiply.
    const int t = in.iter + 1;
    const float correction =
        static_cast<float>(std::sqrt(1.0 - std::pow(double{hyper.momentum2}, t)) /
                           (1.0 - std::pow(double{hyper.momentum}, t)));
    s.local_rate = s.local_rate * correction;
    s.a = hyper.momentum;
    s.b = 1.f - hyper.momentum;
    s.c = hyper.momentum2;
    s.d = 1.f - hyper.momentum2;
  } else {
    PSTRAIN_CHECK_MSG(false, "ApplyUpdateGpu: unknown solver type \"" + type + "\"");
  }
  const bool two = kind == gpu::RuleKind::kAdaDelta || kind == gpu::RuleKind::kAdam;
  gpu::LaunchUpdate(kind, s, data, diff, history[0], two ? history[1] : nullptr,
                    static_cast<int64_t>(n), stream);
}

void AddSumSquaresGpu(const float* x, size_t n, double* device_sum, cudaStream_t stream) {
  gpu::LaunchAddSumSquares(x, static_cast<int64_t>(n), device_sum, stream);
}

}  // namespace pstrain::optim

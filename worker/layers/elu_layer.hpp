// ELU: y = x for x > 0, alpha * (exp(x) - 1) otherwise (elu_param.alpha,
// default 1); dx = dy for x > 0, dy * (y + alpha) otherwise. In place the
// bottom is kept for the backward's test of x > 0.
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class ELULayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;

  const char* type() const override { return "ELU"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif

 protected:
  bool BackwardReadsBottom() const override { return true; }
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif
};

}  // namespace pstrain

// BNLL (binomial normal log likelihood): y = log(1 + exp(x)), computed as
// x + log(1 + exp(-x)) for x > 0; dx = dy * e / (e + 1) with
// e = exp(min(x, 50)) (Caffe's threshold). The backward reads the bottom, so
// in place the bottom is kept (NeuronLayer::KeepBottom).
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class BNLLLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;

  const char* type() const override { return "BNLL"; }
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

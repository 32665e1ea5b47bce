// Swish: y = x * sigmoid(beta * x) (swish_param.beta, default 1);
// dx = dy * (beta * y + s * (1 - beta * y)) with s = sigmoid(beta * x) kept
// from the forward, so in place needs no copy of the bottom.
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class SwishLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;

  const char* type() const override { return "Swish"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif

 private:
  Blob sigmoid_;  // sigmoid(beta * x) of the last forward
};

}  // namespace pstrain

// TanH: y = tanh(x). Backward uses only the top data and diff:
// dx = dy * (1 - y^2).
// A NeuronLayer: one bottom, one top of its shape, may run in place.
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class TanHLayer : public NeuronLayer {
 public:
  explicit TanHLayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}

  const char* type() const override { return "TanH"; }
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
};

}  // namespace pstrain

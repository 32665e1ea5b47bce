// Sigmoid: y = 1 / (1 + exp(-x)). Backward uses only the top data and diff:
// dx = dy * y * (1 - y).
// A NeuronLayer: one bottom, one top of its shape, may run in place.
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class SigmoidLayer : public NeuronLayer {
 public:
  explicit SigmoidLayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}

  const char* type() const override { return "Sigmoid"; }
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

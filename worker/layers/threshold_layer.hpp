// Threshold: y = 1 if x > threshold, 0 otherwise (threshold_param.threshold,
// default 0). A step has no useful gradient: the bottom takes none unless
// forced, and then gets zeros (Caffe has no backward at all).
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class ThresholdLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  bool AllowForceBackward(int) const override { return false; }

  const char* type() const override { return "Threshold"; }
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

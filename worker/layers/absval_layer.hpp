// AbsVal: y = |x|; dx = dy * sign(x) (sign(0) = 0). As in Caffe it does not
// run in place: set-up refuses top == bottom (the backward reads the bottom).
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class AbsValLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;

  const char* type() const override { return "AbsVal"; }
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

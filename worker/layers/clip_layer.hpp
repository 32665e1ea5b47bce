// Clip: y = min(max(x, min), max) (clip_param.min and .max, both required,
// min <= max); dx = dy where min <= x <= max, 0 elsewhere. In place the
// bottom is kept for that test.
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class ClipLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;

  const char* type() const override { return "Clip"; }
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

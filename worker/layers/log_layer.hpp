// Log: y = log_base(shift + scale * x) (log_param; base -1, the default,
// means e); dx = dy * scale / ((shift + scale * x) * ln(base)). base must be
// positive or -1. In place the bottom is kept for the backward.
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class LogLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;

  const char* type() const override { return "Log"; }
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

 private:
  float base_scale_ = 1.f;  // 1 / ln(base), 1 for e
};

}  // namespace pstrain

// Exp: y = base^(shift + scale * x) (exp_param; base -1, the default, means
// e), computed as outer * exp(inner * x) with inner = scale * ln(base) and
// outer = base^shift; dx = dy * y * inner (reads the top only, so in place
// needs nothing kept). base must be positive or -1.
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class ExpLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;

  const char* type() const override { return "Exp"; }
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
  float inner_scale_ = 1.f;
  float outer_scale_ = 1.f;
};

}  // namespace pstrain

// Power: y = (shift + scale * x)^power (power_param, defaults 1, 1, 0);
// dx = dy * power * scale * (shift + scale * x)^(power - 1). When
// power * scale is 0 the top is constant (1 for power 0, shift^power
// otherwise) and dx is 0, as in Caffe. In place the bottom is kept.
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class PowerLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;

  const char* type() const override { return "Power"; }
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

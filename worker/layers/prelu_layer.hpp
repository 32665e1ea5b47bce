// PReLU: y = max(x, 0) + a_c * min(x, 0) with a learnable slope a_c per
// channel (axis 1), or one slope for all channels with
// prelu_param.channel_shared. The slopes (blobs()[0], shape {C} or {1}) start
// from prelu_param.filler, constant 0.25 by default.
// Gradients: dx = dy where x > 0, a_c * dy elsewhere; the slopes' diff gets
// the sum of dy * x over x <= 0 (added to what is there, as every param
// diff). The bottom needs at least 2 axes. In place the bottom is kept for
// the backward (as Caffe's PReLU does).
#pragma once

#include <vector>

#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

class PReLULayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Also checks that the slopes (possibly loaded) match the bottom's channels.
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "PReLU"; }
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
  // Element i belongs to channel (i / inner_) % channels_ (0 when shared).
  int channels_ = 1;
  int64_t inner_ = 1;
  bool shared_ = false;
#ifdef PSTRAIN_HAVE_CUDA
  Blob slope_terms_;  // GPU scratch: dy * x where x <= 0
#endif
};

}  // namespace pstrain

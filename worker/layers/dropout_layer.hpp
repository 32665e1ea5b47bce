// Dropout: Caffe's inverted dropout.
//
// TRAIN: each element is kept with probability 1 - dropout_ratio and scaled
// by 1 / (1 - dropout_ratio), else zeroed; the mask is kept for Backward.
// TEST: identity. May run in place. The mask stream comes from an Rng seeded
// with MixSeed(context().seed, hash of the layer name), created at the first
// TRAIN forward, so a run is reproducible for a given seed.
// The GPU path draws its mask from a counter-based hash of (seed, draw,
// element) instead (dropout_layer.cu): same distribution, other draws.
#pragma once

#include <memory>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class DropoutLayer : public Layer {
 public:
  explicit DropoutLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Dropout"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

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
  float ratio_ = 0.5f;
  float scale_ = 2.f;
  std::vector<float> mask_;  // per element: 0 or scale_ (last TRAIN forward)
  std::unique_ptr<Rng> rng_;
#ifdef PSTRAIN_HAVE_CUDA
  uint64_t gpu_draws_ = 0;  // TRAIN forwards run on the GPU so far
  uint64_t gpu_draw_ = 0;   // the draw of the last one (dropout_layer.cu)
#endif
};

}  // namespace pstrain

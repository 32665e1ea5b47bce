// Dropout: Caffe's inverted dropout.
//
// TRAIN: each element is kept with probability 1 - dropout_ratio and scaled
// by 1 / (1 - dropout_ratio), else zeroed; the mask is kept for Backward.
// TEST: identity. May run in place. The mask stream comes from an Rng seeded
// with MixSeed(context().seed, hash of the layer name), created at the first
// TRAIN forward, so a run is reproducible for a given seed.
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
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;

 private:
  float ratio_ = 0.5f;
  float scale_ = 2.f;
  std::vector<float> mask_;  // per element: 0 or scale_ (last TRAIN forward)
  std::unique_ptr<Rng> rng_;
};

}  // namespace pstrain

// SigmoidCrossEntropyLoss: cross-entropy between sigmoid(x) (x = bottom 0) and
// targets t in [0, 1] (bottom 1, same count), summed over elements:
//   -sum_i [t_i log s(x_i) + (1 - t_i) log(1 - s(x_i))]
// evaluated in Caffe's overflow-free form
//   -sum_i [x_i (t_i - [x_i >= 0]) - log(1 + exp(x_i - 2 x_i [x_i >= 0]))],
// divided by the normaliser of loss_param.normalization (default VALID) with
// outer = shape(0) and inner = count(1). Elements whose target, truncated to
// int as Caffe does, equals loss_param.ignore_label add nothing and are not
// counted as valid. Gradient to bottom 0 only: (s(x) - t) * loss_weight /
// normalizer, zero at ignored elements.
#pragma once

#include <vector>

#include "worker/layers/loss_layer.hpp"

namespace pstrain {

class SigmoidCrossEntropyLossLayer : public LossLayer {
 public:
  using LossLayer::LossLayer;

  const char* type() const override { return "SigmoidCrossEntropyLoss"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;

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
  bool Ignored(float target) const;

  caffe::LossParameter::NormalizationMode normalization_ = caffe::LossParameter::VALID;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  float normalizer_ = 1.f;  // from the last Forward
#ifdef PSTRAIN_HAVE_CUDA
  // GPU path scratch: per element loss term and 1/0 counted; their two sums.
  Blob gpu_terms_, gpu_counted_, gpu_sums_;
#endif
};

}  // namespace pstrain

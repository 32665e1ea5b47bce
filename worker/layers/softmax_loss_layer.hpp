// SoftmaxWithLoss: multinomial logistic loss of the softmax of bottom 0.
//
// Bottom 0: scores with the class axis softmax_param.axis (default 1), of
// shape outer x C x inner (outer = count(0, axis), inner = count(axis + 1)).
// Bottom 1: one class label per (outer, inner) position, stored as floats;
// its count must be outer * inner. Top 0: the scalar loss
//   -sum over non-ignored positions of log(max(p[label], FLT_MIN)) / normalizer
// (loss_param.normalization, default VALID; see LossNormalizer). Optional top
// 1: the softmax probabilities, shaped as bottom 0 (it takes no gradient).
// Gradient flows to bottom 0 only: (p - onehot(label)) * loss_weight /
// normalizer, zero at ignored positions.
//
// Labels outside [0, C) that are not loss_param.ignore_label are broken input
// that Reshape cannot see. Forward does not abort on them (Caffe CHECKs):
// such positions add neither loss nor gradient, the loss in top 0 is NaN (so
// the net's loss visibly breaks) and last_error() names the first bad label.
// The next Forward with valid labels clears last_error().
#pragma once

#include <vector>

#include "worker/layers/loss_layer.hpp"

namespace pstrain {

class SoftmaxWithLossLayer : public LossLayer {
 public:
  using LossLayer::LossLayer;

  const char* type() const override { return "SoftmaxWithLoss"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumTopBlobs() const override { return -1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;

  // Ok, or the first out-of-range label seen by the last Forward.
  const Status& last_error() const { return last_error_; }
  Status RuntimeStatus() const override { return last_error_; }

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
  // Writes the softmax of bottom 0 along the class axis into prob_.
  void ComputeSoftmax(const Blob& scores);

  caffe::LossParameter::NormalizationMode normalization_ = caffe::LossParameter::VALID;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  int axis_ = 1;
  int64_t outer_ = 0;
  int64_t inner_ = 0;
  int channels_ = 0;
  Blob prob_;
  std::vector<float> scratch_;  // inner_ floats: per-position max, then sum
  // From the last Forward: 1 where the position counts, 0 where it is ignored
  // or its label is broken; and the normaliser used.
  std::vector<unsigned char> counted_;
  float normalizer_ = 1.f;
  Status last_error_;
#ifdef PSTRAIN_HAVE_CUDA
  // GPU path scratch, per position: loss term, 1/0 counted, 1/0 broken
  // label; and their three sums.
  Blob gpu_terms_, gpu_counted_, gpu_broken_, gpu_sums_;
#endif
};

}  // namespace pstrain

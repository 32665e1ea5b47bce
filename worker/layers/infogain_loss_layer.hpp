// InfogainLoss: the softmax of bottom 0 over infogain_loss_param.axis
// (default 1; K classes) weighed by an infogain matrix H (K x K):
//   loss = -sum over counted positions of sum_l H[label, l] log(max(p_l, 1e-20))
// divided by the normaliser of loss_param.normalization (default VALID).
// Bottom 1: one label per (outer, inner) position, stored as floats; optional
// bottom 2: H itself; without it H is read at set-up from the binary BlobProto
// file infogain_loss_param.source. Optional top 1: the probabilities.
// Only the scores take a gradient: (p_l * sum_k H[label, k] - H[label, l])
// times loss weight / normaliser; zero at loss_param.ignore_label positions.
// A label outside [0, K) that is not the ignore label is broken input: the
// loss is NaN, the position takes no gradient, and RuntimeStatus() names the
// first such label.
#pragma once

#include <memory>
#include <vector>

#include "worker/layers/loss_layer.hpp"

namespace pstrain {

class InfogainLossLayer : public LossLayer {
 public:
  using LossLayer::LossLayer;

  const char* type() const override { return "InfogainLoss"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return -1; }
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return -1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
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
  const Blob& Infogain(const BlobVec& bottom) const {
    return bottom.size() > 2 ? *bottom[2] : infogain_;
  }
  // Runs the inner softmax on this layer's engine; checks the labels (host),
  // filling counted_ and last_error_, computes the row sums of H and the
  // normaliser. Shared by both paths.
  void Prepare(const BlobVec& bottom);

  std::unique_ptr<Layer> softmax_;
  Blob prob_;
  Blob infogain_;  // H read from infogain_loss_param.source
  Blob row_sums_;  // sum_l H[k, l]
  caffe::LossParameter::NormalizationMode normalization_ = caffe::LossParameter::VALID;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  int64_t outer_ = 0;
  int64_t inner_ = 0;
  int classes_ = 0;
  std::vector<float> counted_;  // 1 where a position counts (host; copied for the GPU)
  Blob counted_blob_;
  float normalizer_ = 1.f;
  Status last_error_;
#ifdef PSTRAIN_HAVE_CUDA
  Blob terms_;  // GPU: per-position loss terms
#endif
};

}  // namespace pstrain

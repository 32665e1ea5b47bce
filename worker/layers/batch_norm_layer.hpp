// BatchNorm: Caffe's batch normalisation of an N x C x (any spatial) blob,
// without scale and shift (a Scale layer follows it in Caffe nets).
//
// Blobs (Caffe's order, none learned: their diffs are never written):
//   0: [C] running sum of means, 1: [C] running sum of variances,
//   2: [1] running normaliser s. The stored estimates are blob/s (0 when s = 0).
// With use_global_stats (default: phase == TEST),
//   top = (x - mean) / sqrt(var + eps) from the stored estimates.
// Otherwise the batch's mean and biased variance are used, and each Forward
// updates s = maf * s + 1, mean_sum = maf * mean_sum + mean and
// var_sum = maf * var_sum + m/(m-1) * var, where m = N * spatial size.
// In-place (bottom == top) is supported. The fast path runs oneDNN's
// batch_normalization primitives (batch_norm_layer_dnnl.cpp, the only file of
// the layer that includes oneDNN).
// GPU path (CUDA builds): own kernels (batch_norm_layer.cu).
//
// Fused with the Scale after it (Net::FuseLayers, docs/architecture.md,
// "BatchNorm and Scale fused"): under the fast and GPU engines, when a Scale
// layer multiplies this layer's top in place by a learned per-channel scale,
// Forward writes x_norm * scale + bias in one pass (batch_norm_cpu_kernels.hpp
// on the CPU), the Scale layer's Forward does nothing, and the Scale layer's
// Backward runs BackwardFused: both gradients of the pair and this layer's
// bottom diff, after which this layer's Backward does nothing. A ReLU in
// place right after the Scale is taken over too (its Forward and Backward do
// nothing; the fused passes apply it). The blobs, the statistics and the
// numbers (to rounding) are those of the layers apart.
#pragma once

#include <memory>
#include <vector>

#include "worker/layer.hpp"
#include "worker/layers/fused_scale_owner.hpp"

namespace pstrain {

class ScaleLayer;

class BatchNormLayer : public Layer, public FusedScaleOwner {
 public:
  explicit BatchNormLayer(const caffe::LayerParameter& param);
  ~BatchNormLayer() override;

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "BatchNorm"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasFastPath() const override { return true; }

  // Net::FuseLayers: takes over a Scale that multiplies `top` in place by a
  // learned per-channel scale (ScaleLayer::ScalesChannelsOf `bottom`, this
  // layer's bottom, whose diff BackwardFused writes), then a ReLU in place
  // after it; nothing else, and nothing when this layer has a loss weight.
  bool TakeOver(Layer& next, Blob* bottom, Blob* top) override;
  // The Scale taken over, or null.
  ScaleLayer* fused_scale() const { return fused_scale_; }
  // FusedScaleOwner's, run from the Scale layer's Backward. This layer's own
  // Backward then writes the bottom diff only if it is asked for one that was
  // not written.
  // REQUIRES: a Scale taken over, then Forward under the same engine.
  void BackwardFused(bool scale_diff, bool bias_diff, bool bottom_diff) override;

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
  void ForwardFast(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif

 private:
  struct DnnlState;  // oneDNN primitives for the current shape (batch_norm_layer_dnnl.cpp)
  struct DnnlStateDeleter {
    void operator()(DnnlState* state) const;
  };

  // mean_/variance_ from the stored estimates (global stats).
  void LoadGlobalStats();
  // Folds mean_ and variance_ (biased batch statistics) into blobs 0..2.
  void UpdateRunningStats();
  // std_ = sqrt(variance_ + eps).
  void ComputeStd();
  void BuildDnnl(const Blob& bottom);
  void ForwardFused(const BlobVec& bottom, const BlobVec& top);
  // Backward of the fused layers when this layer's Backward runs.
  void BackwardFusedSlot(const std::vector<bool>& propagate_down);
#ifdef PSTRAIN_HAVE_CUDA
  // Batch statistics into mean_/variance_ and the running sums, or the
  // stored estimates; then std_.
  void GpuStatistics(const float* x);
  void BackwardFusedGpu(bool scale_diff, bool bias_diff, bool bottom_diff);
#endif

  bool use_global_stats_ = false;
  float moving_average_fraction_ = 0.999f;
  float eps_ = 1e-5f;
  int channels_ = 0;
  int num_ = 0;
  int64_t spatial_ = 0;
  Blob mean_;      // [C] mean used by the last Forward
  Blob variance_;  // [C] (biased) variance used by the last Forward
  Blob std_;       // [C] sqrt(variance + eps)
  Blob x_norm_;    // reference, fused: the normalised values; fast: the input when in place
  ScaleLayer* fused_scale_ = nullptr;  // the Scale taken over, or null
  Blob* fused_bottom_ = nullptr;
  Blob* fused_top_ = nullptr;
  bool fused_bottom_diff_done_ = false;  // by the last BackwardFused
  bool relu_gated_ = false;  // GPU: the top's diff gated in place since the last Forward
  bool fused_relu_ = false;
  float relu_slope_ = 0.f;
  std::unique_ptr<DnnlState, DnnlStateDeleter> dnnl_;
};

}  // namespace pstrain

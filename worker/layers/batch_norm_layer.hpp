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
#pragma once

#include <memory>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class BatchNormLayer : public Layer {
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

  bool use_global_stats_ = false;
  float moving_average_fraction_ = 0.999f;
  float eps_ = 1e-5f;
  int channels_ = 0;
  int num_ = 0;
  int64_t spatial_ = 0;
  Blob mean_;      // [C] mean used by the last Forward
  Blob variance_;  // [C] (biased) variance used by the last Forward
  Blob std_;       // [C] sqrt(variance + eps)
  Blob x_norm_;    // reference: copy of top; fast: the input when in place
  std::unique_ptr<DnnlState, DnnlStateDeleter> dnnl_;
};

}  // namespace pstrain

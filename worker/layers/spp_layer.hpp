// SPP: spatial pyramid pooling, Caffe's SPPLayer. Level l < spp_param.
// pyramid_height (required, positive) pools the 4-D bottom (N, C, H, W) by
// spp_param.pool (MAX default, or AVE) into about 2^l x 2^l bins: kernel
// ceil(H / 2^l), stride the kernel, pad (kernel 2^l - H + 1) / 2 (the same for
// W). Built as Caffe builds it, from the engine's own layers: Split, then per
// level Pooling and Flatten, then Concat along axis 1: top (N, C sum_l bins_l).
// With pyramid_height 1 it is the one Pooling layer alone: top (N, C, 1, 1).
// A bottom whose H or W changes rebuilds the levels (Caffe does the same).
// Each inner layer runs on this layer's engine, so their paths (reference,
// fast, GPU) are this layer's.
#pragma once

#include <memory>
#include <vector>

#include "common/blob.hpp"
#include "worker/layer.hpp"

namespace pstrain {

class SPPLayer : public Layer {
 public:
  explicit SPPLayer(const caffe::LayerParameter& param);
  ~SPPLayer() override;

  const char* type() const override { return "SPP"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

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
  // One inner layer and the blobs it reads and writes, in running order.
  struct Step {
    std::unique_ptr<Layer> layer;
    BlobVec bottom, top;
  };
  // Builds and sets up the inner layers for the bottom's H x W.
  Status Build(const BlobVec& bottom, const BlobVec& top);
  // Run the steps on `engine`; the first step reads `bottom`, the last
  // writes `top` (the blobs of this call).
  void RunForward(Engine engine, const BlobVec& bottom, const BlobVec& top);
  void RunBackward(Engine engine, const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom);

  std::vector<Step> steps_;
  std::vector<std::unique_ptr<Blob>> inner_blobs_;  // split, pooled and flattened blobs
  int height_ = -1, width_ = -1;                    // what steps_ were built for
};

}  // namespace pstrain

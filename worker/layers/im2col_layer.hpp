// Im2col: Caffe's Im2colLayer. Unrolls the kernel-sized patches of a 4-D
// bottom (N, C, H, W) by convolution_param's kernel, pad, stride and dilation
// (num_output, group and the fillers are ignored, as in Caffe) into the top
// (N, C kh kw, out_h, out_w), channel c kh kw + i kw + j holding input channel
// c at kernel offset (i, j), zero where the patch is padding; out_h, out_w as
// Convolution's. The gradient adds each top value back to its input pixel
// (col2im). Only axis 1 and 2-D patches, as the engine's Convolution.
//
// Built on the Convolution layer, not a copy of its im2col: a Convolution of
// its own with group = C and C kh kw outputs whose weights select one kernel
// offset each (1 there, 0 elsewhere) computes exactly im2col forward and
// col2im backward, on every engine Convolution has (im2col + GEMM, oneDNN,
// cuDNN). Exact for finite inputs on the CPU paths (an inf or NaN also
// reaches the other outputs of its window through the zero weights); within
// rounding where cuDNN picks a transforming algorithm (FFT, Winograd).
#pragma once

#include <memory>
#include <vector>

#include "worker/layer.hpp"
#include "worker/layers/conv_layer.hpp"

namespace pstrain {

class Im2colLayer : public Layer {
 public:
  using Layer::Layer;

  const char* type() const override { return "Im2col"; }
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
  // Runs the selecting convolution on `engine`.
  void RunForward(Engine engine, const BlobVec& bottom, const BlobVec& top);
  void RunBackward(Engine engine, const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom);

  std::unique_ptr<ConvolutionLayer> select_;  // the selecting convolution (no learnable blobs)
};

}  // namespace pstrain

// ConvolutionLayer ("Convolution"): Caffe's 2-D convolution with groups,
// dilation, padding and stride.
//
// Bottoms and tops pair up (bottom i -> top i, all bottoms the same shape,
// weights shared). Params, in Caffe's order and shapes:
//   blobs()[0] weights [num_output, channels / group, kernel_h, kernel_w]
//   blobs()[1] bias    [num_output]                 (when bias_term)
// Output size per spatial axis: (in + 2 pad - (dilation (kernel - 1) + 1)) / stride + 1.
// Only the channel axis 1 and 4-D bottoms (N, C, H, W) are supported.
//
// Reference path: im2col + GEMM per image and group. Fast path: oneDNN
// convolution primitives, created per bottom shape and reused until the shape
// changes (they are built in Reshape, so the first Forward after a shape
// change pays nothing extra); they live in conv_layer_dnnl.cpp, the only file
// of the layer that includes oneDNN.
// CPU implementations (Layer::CpuImplementations, chosen by engine auto):
//   "onednn-blocked"  oneDNN in the layout it prefers (format any; channel-
//                     blocked on AVX2/AVX-512), reorders from and to NCHW in
//                     the layer (the default of engine fast)
//   "onednn"          oneDNN on plain NCHW/OIHW, no reorders
//   "onednn-blocked+gemm-wgrad", "onednn+gemm-wgrad"  as those, but the weight
//                     (and bias) gradient by im2col + GEMM, which wins where
//                     oneDNN's weight-gradient kernel is slow (one input channel)
//   "reference"       im2col + GEMM (OpenBLAS) in every direction
//   "winograd"        Winograd F(2x2, 3x3) + GEMM (BLAS) in every direction,
//                     offered for 3x3 kernels, stride 1, no dilation, pad <= 2
//                     (conv_winograd.hpp): 2.25x fewer multiplies, which wins
//                     where oneDNN has no Winograd kernel (AVX2)
// GPU path (CUDA builds): cuDNN, descriptors kept per bottom shape,
// algorithms measured once per shape and direction and cached for the
// process, workspace from the caching allocator per call (conv_layer.cu).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/blob.hpp"
#include "worker/layer.hpp"

namespace pstrain {

// The convolution's hyper-parameters, resolved from ConvolutionParameter.
struct ConvGeometry {
  int num_output = 0;
  int group = 1;
  bool bias_term = true;
  int kernel_h = 0, kernel_w = 0;
  int pad_h = 0, pad_w = 0;
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
};

// Reads and checks the geometry of `p` (kernel, pad, stride, dilation,
// num_output, group); the error says which field is wrong. Shared with
// Deconvolution (deconv_layer.hpp).
Status ParseConvGeometry(const caffe::ConvolutionParameter& p, ConvGeometry* g);

// The bottoms a `type` layer (Convolution, Deconvolution) set up for
// `channels` input channels can take: 4 axes, that many channels, all bottoms
// of one shape; the error names the bottom and both shapes.
Status CheckConvBottoms(const BlobVec& bottom, int channels, const char* type);

// The learnable blobs of a Convolution or Deconvolution named `name`: ones
// already there (loaded or shared) are checked against `weight_shape` and, with
// bias_term, a bias of num_output; else they are made and filled from p's
// fillers, seeded from the net's seed and the name.
Status SetUpConvParams(const caffe::ConvolutionParameter& p, const std::vector<int>& weight_shape,
                       const ConvGeometry& g, const NetContext& context, const std::string& name,
                       std::vector<std::shared_ptr<Blob>>* blobs);

class WinogradConv;  // conv_winograd.hpp

class ConvolutionLayer : public Layer {
 public:
  explicit ConvolutionLayer(const caffe::LayerParameter& param);
  ~ConvolutionLayer() override;

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;

  const char* type() const override { return "Convolution"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
  // "cudnn-legacy" or "cudnn-graph" (worker/layers/cudnn_conv_api.hpp), with
  // "+legacy" when a direction of the graph path fell back to the legacy
  // calls; "gpu" before the first pass.
  std::string GpuImplementation() const override;
#endif
  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool EqualNumBottomTopBlobs() const override { return true; }
  bool HasFastPath() const override { return true; }
  std::vector<std::string> CpuImplementations() const override;
  Status SelectCpuImplementation(const std::string& name) override;
  std::string CpuImplementation() const override;
  // True when the fast path runs oneDNN for the current shape; false when it
  // has not been prepared yet or oneDNN refused the shape (the reference serves).
  bool UsesDnnl() const { return dnnl_[Layout()] != nullptr; }

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
  class DnnlConv;  // the oneDNN primitives for one bottom shape (conv_layer_dnnl.cpp)
  struct DnnlConvDeleter {
    void operator()(DnnlConv* conv) const;
  };

  // True when the fast path has primitives for the current shape (builds them
  // if needed); false when oneDNN cannot run this configuration.
  bool PrepareDnnl();
  // Whether im2col is the identity (1x1 kernel, stride 1, no pad).
  bool IsPointwise() const;
  // Fills col_ with the im2col of one image (C x H x W).
  void Im2Col(const float* image);
  // The reference weight and bias gradients of bottom/top pair i (added).
  void WeightGradientReference(const float* bottom_data, const float* top_diff, float* weight_diff,
                               float* bias_diff);

  // Which CPU implementation kFast runs (see the header comment).
  enum class CpuImpl {
    kOnednnBlocked,
    kOnednn,
    kOnednnBlockedGemmWgrad,
    kOnednnGemmWgrad,
    kReference,
    kWinograd
  };
  // oneDNN on plain NCHW (no reorders) for cpu_impl_.
  bool PlainLayout() const {
    return cpu_impl_ == CpuImpl::kOnednn || cpu_impl_ == CpuImpl::kOnednnGemmWgrad;
  }
  int Layout() const { return PlainLayout() ? 1 : 0; }

  ConvGeometry geo_;
  int channels_ = 0;
  int num_ = 0, height_ = 0, width_ = 0;
  int out_h_ = 0, out_w_ = 0;
  std::vector<float> col_;              // im2col buffer, (C k_h k_w) x (out_h out_w)
  std::vector<float> bias_multiplier_;  // out_h out_w ones
  // The primitives per layout ([0] blocked, [1] plain), both kept so that
  // engine auto switches between implementations without rebuilding them.
  std::unique_ptr<DnnlConv, DnnlConvDeleter> dnnl_[2];
  // oneDNN refused this shape in that layout: the fast path runs the reference.
  bool dnnl_failed_[2] = {false, false};
  CpuImpl cpu_impl_ = CpuImpl::kOnednnBlocked;
  // Runs kWinograd: built on first use, dropped when the shape changes.
  std::unique_ptr<WinogradConv> winograd_;
  WinogradConv& PrepareWinograd();
  // oneDNN primitives are (to be) prepared: a oneDNN implementation is selected.
  bool RunsDnnl() const {
    return cpu_impl_ != CpuImpl::kReference && cpu_impl_ != CpuImpl::kWinograd;
  }
#ifdef PSTRAIN_HAVE_CUDA
  struct CudnnConv;  // cuDNN descriptors and chosen algorithms (conv_layer.cu)
  struct CudnnConvDeleter {
    void operator()(CudnnConv* conv) const;
  };
  // The cuDNN state for the current bottom shape, built when it changed.
  CudnnConv& PrepareCudnn();
  std::unique_ptr<CudnnConv, CudnnConvDeleter> cudnn_;
#endif
};

}  // namespace pstrain

// DeconvolutionLayer ("Deconvolution"): Caffe's transposed convolution, the
// convolution run backwards (FCN's learned upsampling).
//
// convolution_param as for Convolution (kernel, pad, stride, dilation, group,
// num_output, bias_term, fillers; only axis 1 and 4-D bottoms). Bottoms and
// tops pair up (bottom i -> top i, all bottoms the same shape). Output size per
// spatial axis: stride (in - 1) + dilation (kernel - 1) + 1 - 2 pad.
// Params, in Caffe's order and shapes:
//   blobs()[0] weights [channels, num_output / group, kernel_h, kernel_w]
//   blobs()[1] bias    [num_output]                  (when bias_term)
// The forward is the backward-data pass of the "adjoint" convolution that
// maps the top's shape to the bottom's with the same weights; the bottom
// gradient is that convolution's forward, the weight gradient its weight
// gradient with the roles of input and output swapped. The layer runs them
// through a ConvolutionLayer of its own, so every engine of Convolution
// serves: im2col + GEMM (reference), oneDNN (fast; its implementations are
// this layer's CpuImplementations) and cuDNN (GPU). The bias is the layer's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/layers/conv_layer.hpp"

namespace pstrain {

class DeconvolutionLayer : public Layer {
 public:
  explicit DeconvolutionLayer(const caffe::LayerParameter& param);
  ~DeconvolutionLayer() override;

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Deconvolution"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
  std::string GpuImplementation() const override;
#endif
  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool EqualNumBottomTopBlobs() const override { return true; }
  bool HasFastPath() const override { return true; }
  std::vector<std::string> CpuImplementations() const override;
  Status SelectCpuImplementation(const std::string& name) override;
  std::string CpuImplementation() const override;

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
  // The passes on `engine`, with host or device pointers (gpu).
  void RunForward(Engine engine, const BlobVec& bottom, const BlobVec& top);
  void RunBackward(Engine engine, const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom);
  // y = x (n values), on the host or the device.
  static void CopyValues(int64_t n, const float* x, float* y, bool gpu);
  // top[n, c, s] += bias[c]; bias_diff[c] += sum over n, s of top_diff[n, c, s].
  void AddBias(float* top_data, bool gpu) const;
  void AddBiasGradient(const float* top_diff, bool gpu);
#ifdef PSTRAIN_HAVE_CUDA
  static void GpuCopyValues(int64_t n, const float* x, float* y);  // deconv_layer.cu
  void GpuAddBias(float* top_data) const;
  void GpuAddBiasGradient(const float* top_diff);
#endif

  ConvGeometry geo_;
  int channels_ = 0;  // of the bottoms
  int num_ = 0, out_h_ = 0, out_w_ = 0;
  // The adjoint convolution: input the top's shape, output the bottom's,
  // weights blobs()[0], no bias. adjoint_in_/adjoint_out_ are its bottom and top.
  std::unique_ptr<ConvolutionLayer> adjoint_;
  Blob adjoint_in_;
  Blob adjoint_out_;
  bool adjoint_set_up_ = false;
};

}  // namespace pstrain

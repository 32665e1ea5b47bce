// PoolingLayer ("Pooling"): Caffe's 2-D MAX and AVE pooling.
//
// One 4-D bottom (N, C, H, W). Tops: the pooled values and, for MAX only, an
// optional second top with the argmax of each output as the flat index
// h * W + w into its input plane (Caffe's mask, stored as float).
// Output size per spatial axis (Caffe): ceil((in + 2 pad - kernel) / stride) + 1
// (floor with round_mode: FLOOR); then, when pad > 0 and the last window would
// start at or beyond in + pad, that window is dropped. global_pooling makes
// the kernel the whole plane. AVE divides by the window clipped to
// [-pad, in + pad), before clipping to the input. STOCHASTIC is not supported.
//
// CPU implementations under Engine::kFast (CpuImplementations()):
//   "vector"    (default) own vectorised kernels, pooling_layer_vector.cpp and
//               pooling_cpu_kernels.hpp: every configuration, MAX bitwise the
//               reference (values, argmax, mask, gradients), AVE within
//               rounding; AVX-512, AVX2 or generic chosen at run time.
//   "onednn"    oneDNN pooling on NCHW memory (pooling_layer_dnnl.cpp, the only
//               file of the layer that includes oneDNN), with the workspace for
//               MAX backward; not offered where oneDNN cannot express the
//               configuration exactly (AVE with padding whose last window runs
//               past in + pad; MAX with the mask top).
//   "reference" the plain loops below.
// GPU path (CUDA builds): own kernels for MAX (Caffe's first-maximum rule
// and mask), cuDNN for AVE where it matches exactly (pooling_layer.cu).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class PoolingLayer : public Layer {
 public:
  explicit PoolingLayer(const caffe::LayerParameter& param);
  ~PoolingLayer() override;

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;

  const char* type() const override { return "Pooling"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override {
    return param_.pooling_param().pool() == caffe::PoolingParameter::MAX ? 2 : 1;
  }
  bool HasFastPath() const override { return true; }
  std::vector<std::string> CpuImplementations() const override;
  Status SelectCpuImplementation(const std::string& name) override;
  std::string CpuImplementation() const override;
  // True when oneDNN primitives are prepared for the current shape and tops
  // (the "onednn" implementation ran or was selected for this shape).
  bool UsesDnnl() const { return dnnl_ != nullptr; }

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
  // Whether the GPU path runs cuDNN (AVE where it matches Caffe exactly).
  bool AveUsesCudnn() const;
#endif

 private:
  class DnnlPool;  // oneDNN primitives for one bottom shape (pooling_layer_dnnl.cpp)
  struct DnnlPoolDeleter {
    void operator()(DnnlPool* pool) const;
  };

  // True when the fast path has primitives for the current shape (builds them
  // if needed); false when the reference path must serve.
  bool PrepareDnnl(size_t num_tops);
  // Whether oneDNN can run the current configuration exactly (before building).
  bool DnnlExpressible() const;
  // The "onednn" implementation (pooling_layer_dnnl.cpp). REQUIRES: PrepareDnnl.
  void ForwardDnnl(const BlobVec& bottom, const BlobVec& top);
  void BackwardDnnl(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom);
  // The "vector" implementation (pooling_layer_vector.cpp).
  void ForwardVector(const BlobVec& bottom, const BlobVec& top);
  void BackwardVector(const BlobVec& top, const std::vector<bool>& propagate_down,
                      const BlobVec& bottom);
  // One output window [h0, h1) x [w0, w1), clipped to the input, and Caffe's
  // AVE divisor.
  struct Window {
    int h0, h1, w0, w1;
    int pool_size;
  };
  Window WindowAt(int ph, int pw) const;

  bool max_ = true;  // MAX, else AVE
  bool global_ = false;
  bool floor_ = false;
  int kernel_h_ = 0, kernel_w_ = 0;
  int pad_h_ = 0, pad_w_ = 0;
  int stride_h_ = 1, stride_w_ = 1;
  int num_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  int pooled_h_ = 0, pooled_w_ = 0;
  size_t num_tops_ = 1;
  std::string selected_;        // SelectCpuImplementation's choice; empty: the default
  std::vector<int> max_index_;  // MAX argmax when there is no mask top (vector: always)
  std::unique_ptr<DnnlPool, DnnlPoolDeleter> dnnl_;
  bool dnnl_unusable_ = false;  // the current shape runs the reference
#ifdef PSTRAIN_HAVE_CUDA
  Blob max_index_gpu_;  // GPU MAX argmax (as float) when there is no mask top
  struct CudnnState;    // cuDNN descriptors for the current shape (pooling_layer.cu)
  struct CudnnStateDeleter {
    void operator()(CudnnState* state) const;
  };
  // The descriptors for the current bottom shape, set again when it changed.
  CudnnState& PrepareCudnn();
  std::unique_ptr<CudnnState, CudnnStateDeleter> cudnn_;
#endif
};

}  // namespace pstrain

// LRN: Caffe's local response normalisation of an N x C x H x W blob.
//
//   ACROSS_CHANNELS: top = x * (k + alpha/n * sum of x^2 over n neighbouring channels)^-beta
//   WITHIN_CHANNEL:  top = x * (1 + alpha/n^2 * sum of x^2 over an n x n window)^-beta
// Windows are centred and clipped at the borders (out-of-range terms count as
// zero, the divisor stays n or n^2). WITHIN_CHANNEL ignores k, as Caffe's
// pooling-and-power implementation does. local_size n must be odd.
// CPU implementations under Engine::kFast (CpuImplementations()):
//   "vector"    (default for ACROSS_CHANNELS) own vectorised kernels
//               (lrn_layer_vector.cpp, lrn_cpu_kernels.hpp); ACROSS only.
//   "onednn"    (default for WITHIN_CHANNEL) oneDNN's lrn primitives, whose
//               conventions match these (lrn_layer_dnnl.cpp, the only file of
//               the layer that includes oneDNN).
//   "reference" the plain loops of lrn_layer.cpp.
// Backward of "vector" and "onednn" needs the Forward of the same
// implementation on the same bottom just before (their saved state).
// Not in-place: Backward reads both bottom data and top data.
// GPU path (CUDA builds): cuDNN for ACROSS_CHANNELS within its parameter
// ranges, own kernels otherwise (lrn_layer.cu).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class LrnLayer : public Layer {
 public:
  explicit LrnLayer(const caffe::LayerParameter& param);
  ~LrnLayer() override;

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "LRN"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
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
  // Whether the GPU path runs cuDNN (else own kernels) for these parameters.
  bool UsesCudnn() const;
#endif

 private:
  struct DnnlState;  // oneDNN primitives for the current shape (lrn_layer_dnnl.cpp)
  struct DnnlStateDeleter {
    void operator()(DnnlState* state) const;
  };

  // out = sum of `in` over each element's window (per sample for ACROSS,
  // per plane for WITHIN). REQUIRES: in != out; both shaped like the bottom.
  void WindowSum(const float* in, float* out) const;
  void BuildDnnl(const Blob& bottom);
  // The "onednn" implementation (lrn_layer_dnnl.cpp).
  void ForwardDnnl(const BlobVec& bottom, const BlobVec& top);
  void BackwardDnnl(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom);
  // The "vector" implementation (lrn_layer_vector.cpp).
  void ForwardVector(const BlobVec& bottom, const BlobVec& top);
  void BackwardVector(const BlobVec& top, const std::vector<bool>& propagate_down,
                      const BlobVec& bottom);

  int size_ = 5;
  float alpha_ = 1.f;  // alpha divided by n (ACROSS) or n^2 (WITHIN)
  float beta_ = 0.75f;
  float k_ = 1.f;
  bool across_ = true;
  int num_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  Blob scale_;            // k + alpha * window sum of squares, kept for Backward
  Blob scratch_;          // squares (Forward) or top_diff * top / scale (Backward)
  Blob power_;            // scale^-beta ("vector" Forward, for its Backward)
  std::string selected_;  // SelectCpuImplementation's choice; empty: the default
  std::unique_ptr<DnnlState, DnnlStateDeleter> dnnl_;
#ifdef PSTRAIN_HAVE_CUDA
  struct CudnnState;  // cuDNN descriptors for the current shape (lrn_layer.cu)
  struct CudnnStateDeleter {
    void operator()(CudnnState* state) const;
  };
  // The descriptors for the current bottom shape, set again when it changed.
  CudnnState& PrepareCudnn();
  std::unique_ptr<CudnnState, CudnnStateDeleter> cudnn_;
#endif
};

}  // namespace pstrain

// Softmax along `axis` (default 1), Caffe's semantics: for every position of
// the other axes, y_c = exp(x_c - max x) / sum_c' exp(x_c' - max x).
// Backward uses only the top data and diff: dx = (dy - <dy, y>) * y. May run
// in place.
// GPU path (CUDA builds): cuDNN, own kernels in place (softmax_layer.cu).
#pragma once

#include <memory>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class SoftmaxLayer : public Layer {
 public:
  explicit SoftmaxLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Softmax"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

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
  int axis_ = 1;                // canonical
  int channels_ = 0;            // size of axis_
  int64_t outer_size_ = 0;      // product of the axes before axis_
  int64_t inner_size_ = 0;      // product of the axes after axis_
  std::vector<float> scratch_;  // inner_size_ floats: running max, sum or dot
#ifdef PSTRAIN_HAVE_CUDA
  struct CudnnState;  // cuDNN descriptors for the current shape (softmax_layer.cu)
  struct CudnnStateDeleter {
    void operator()(CudnnState* state) const;
  };
  // The descriptors for the current bottom shape, set again when it changed.
  CudnnState& PrepareCudnn();
  std::unique_ptr<CudnnState, CudnnStateDeleter> cudnn_;
#endif
};

}  // namespace pstrain

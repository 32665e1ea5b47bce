// Softmax on the GPU: cuDNN (accurate, channel mode over an
// [outer, channels, inner, 1] view) when the bottom and top are distinct and
// the view fits cuDNN's int dimensions; otherwise (in place, or huge) the own
// kernels GpuSoftmax/GpuSoftmaxBackward, which follow the reference exactly.
#include <climits>

#include "worker/layers/cudnn_descriptors.hpp"
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/softmax_layer.hpp"

namespace pstrain {
namespace {

// cuDNN tensors take int dimensions and strides.
bool FitsCudnn(const Blob& blob) { return blob.count() <= INT_MAX; }

}  // namespace

// The [outer, channels, inner, 1] view's descriptor, shared by x, y, dx, dy.
struct SoftmaxLayer::CudnnState {
  int64_t outer = -1, inner = -1;
  int channels = -1;
  CudnnTensor desc;
};

void SoftmaxLayer::CudnnStateDeleter::operator()(CudnnState* state) const { delete state; }

// REQUIRES: the view fits cuDNN (FitsCudnn). Set again when the shape changed.
SoftmaxLayer::CudnnState& SoftmaxLayer::PrepareCudnn() {
  if (!cudnn_) cudnn_.reset(new CudnnState);
  CudnnState& d = *cudnn_;
  if (d.outer != outer_size_ || d.inner != inner_size_ || d.channels != channels_) {
    SetTensor4d(d.desc, static_cast<int>(outer_size_), channels_, static_cast<int>(inner_size_), 1);
    d.outer = outer_size_;
    d.inner = inner_size_;
    d.channels = channels_;
  }
  return d;
}

void SoftmaxLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->count() == 0) return;
  if (bottom[0] == top[0] || !FitsCudnn(*bottom[0])) {
    GpuSoftmax(outer_size_, channels_, inner_size_, bottom[0]->gpu_data(),
               top[0]->mutable_gpu_data());
    return;
  }
  const cudnnTensorDescriptor_t desc = PrepareCudnn().desc.get();
  PSTRAIN_CUDNN_CHECK(cudnnSoftmaxForward(
      GpuContext::ForThisThread().cudnn(), CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL,
      CudnnOne(), desc, bottom[0]->gpu_data(), CudnnZero(), desc, top[0]->mutable_gpu_data()));
}

void SoftmaxLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  if (!propagate_down[0] || bottom[0]->count() == 0) return;
  if (bottom[0] == top[0] || !FitsCudnn(*bottom[0])) {
    GpuSoftmaxBackward(outer_size_, channels_, inner_size_, top[0]->gpu_data(), top[0]->gpu_diff(),
                       bottom[0]->mutable_gpu_diff());
    return;
  }
  const cudnnTensorDescriptor_t desc = PrepareCudnn().desc.get();
  PSTRAIN_CUDNN_CHECK(
      cudnnSoftmaxBackward(GpuContext::ForThisThread().cudnn(), CUDNN_SOFTMAX_ACCURATE,
                           CUDNN_SOFTMAX_MODE_CHANNEL, CudnnOne(), desc, top[0]->gpu_data(), desc,
                           top[0]->gpu_diff(), CudnnZero(), desc, bottom[0]->mutable_gpu_diff()));
}

}  // namespace pstrain

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

void SoftmaxLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->count() == 0) return;
  if (bottom[0] == top[0] || !FitsCudnn(*bottom[0])) {
    GpuSoftmax(outer_size_, channels_, inner_size_, bottom[0]->gpu_data(),
               top[0]->mutable_gpu_data());
    return;
  }
  CudnnTensor desc;
  SetTensor4d(desc, static_cast<int>(outer_size_), channels_, static_cast<int>(inner_size_), 1);
  PSTRAIN_CUDNN_CHECK(cudnnSoftmaxForward(GpuContext::ForThisThread().cudnn(),
                                          CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL,
                                          CudnnOne(), desc.get(), bottom[0]->gpu_data(),
                                          CudnnZero(), desc.get(), top[0]->mutable_gpu_data()));
}

void SoftmaxLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  if (!propagate_down[0] || bottom[0]->count() == 0) return;
  if (bottom[0] == top[0] || !FitsCudnn(*bottom[0])) {
    GpuSoftmaxBackward(outer_size_, channels_, inner_size_, top[0]->gpu_data(), top[0]->gpu_diff(),
                       bottom[0]->mutable_gpu_diff());
    return;
  }
  CudnnTensor desc;
  SetTensor4d(desc, static_cast<int>(outer_size_), channels_, static_cast<int>(inner_size_), 1);
  PSTRAIN_CUDNN_CHECK(cudnnSoftmaxBackward(
      GpuContext::ForThisThread().cudnn(), CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL,
      CudnnOne(), desc.get(), top[0]->gpu_data(), desc.get(), top[0]->gpu_diff(), CudnnZero(),
      desc.get(), bottom[0]->mutable_gpu_diff()));
}

}  // namespace pstrain

// Concat on the GPU: strided device-to-device copies (cudaMemcpy2DAsync).
#include "worker/layers/concat_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {

void ConcatLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (bottom.size() == 1 || top[0]->count() == 0) return;  // one bottom: shared storage
  float* y = top[0]->mutable_gpu_data();
  const int64_t top_stride = top[0]->shape(axis_) * inner_size_;
  int64_t offset = 0;
  for (Blob* b : bottom) {
    const int64_t stride = b->shape(axis_) * inner_size_;
    if (stride > 0)
      GpuCopyRows(num_concats_, stride, b->gpu_data(), stride, y + offset, top_stride);
    offset += stride;
  }
}

void ConcatLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  if (bottom.size() == 1 || top[0]->count() == 0) return;
  const float* dy = top[0]->gpu_diff();
  const int64_t top_stride = top[0]->shape(axis_) * inner_size_;
  int64_t offset = 0;
  for (size_t i = 0; i < bottom.size(); ++i) {
    const int64_t stride = bottom[i]->shape(axis_) * inner_size_;
    if (propagate_down[i] && stride > 0) {
      GpuCopyRows(num_concats_, stride, dy + offset, top_stride, bottom[i]->mutable_gpu_diff(),
                  stride);
    }
    offset += stride;
  }
}

}  // namespace pstrain

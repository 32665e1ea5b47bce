// Slice on the GPU: strided device-to-device copies (cudaMemcpy2DAsync).
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/slice_layer.hpp"

namespace pstrain {

void SliceLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (top.size() == 1 || bottom[0]->count() == 0) return;  // one top: shared storage
  const float* x = bottom[0]->gpu_data();
  const int64_t bottom_stride = bottom[0]->shape(axis_) * inner_size_;
  int64_t offset = 0;
  for (Blob* t : top) {
    const int64_t stride = t->shape(axis_) * inner_size_;
    if (stride > 0) {
      GpuCopyRows(num_slices_, stride, x + offset, bottom_stride, t->mutable_gpu_data(), stride);
    }
    offset += stride;
  }
}

void SliceLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0] || top.size() == 1 || bottom[0]->count() == 0) return;
  float* dx = bottom[0]->mutable_gpu_diff();
  const int64_t bottom_stride = bottom[0]->shape(axis_) * inner_size_;
  int64_t offset = 0;
  for (Blob* t : top) {
    const int64_t stride = t->shape(axis_) * inner_size_;
    if (stride > 0)
      GpuCopyRows(num_slices_, stride, t->gpu_diff(), stride, dx + offset, bottom_stride);
    offset += stride;
  }
}

}  // namespace pstrain

// Crop on the GPU: one thread per top element, the bottom index from the
// crop's strides and offsets (CropGeometry, passed by value).
#include "worker/layers/crop_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__device__ int64_t CropSource(const CropGeometry& g, int64_t i) {
  int64_t src = 0;
  for (int a = 0; a < g.num_axes; ++a) {
    src += (i / g.top_stride[a] + g.offset[a]) * g.bottom_stride[a];
    i %= g.top_stride[a];
  }
  return src;
}

__global__ void CropForward(int64_t n, CropGeometry g, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = x[CropSource(g, i)]; }
}

__global__ void CropBackward(int64_t n, CropGeometry g, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[CropSource(g, i)] = dy[i]; }
}

}  // namespace

void CropLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = top[0]->count();
  if (n == 0) return;
  LaunchKernel(n, CropForward, n, geo_, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
}

void CropLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  GpuSet(bottom[0]->count(), 0.f, bottom[0]->mutable_gpu_diff());
  const int64_t n = top[0]->count();
  if (n == 0) return;
  LaunchKernel(n, CropBackward, n, geo_, top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain

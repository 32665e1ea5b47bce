// Filter on the GPU: the selection is made on the host from the selector
// (FilterLayer::Select), its indices go to the device, then one thread per top
// value gathers forward and one per bottom value scatters backward (0 at the
// dropped samples).
#include "worker/layers/filter_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__global__ void FilterGather(int64_t count, int64_t inner, const float* kept, const float* x,
                             float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) {
    y[i] = x[static_cast<int64_t>(kept[i / inner]) * inner + i % inner];
  }
}

__global__ void FilterScatter(int64_t count, int64_t inner, const float* slot, const float* dy,
                              float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) {
    const float s = slot[i / inner];
    dx[i] = s >= 0.f ? dy[static_cast<int64_t>(s) * inner + i % inner] : 0.f;
  }
}

}  // namespace

void FilterLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  Select(bottom, top);
  const int num = bottom.back()->shape(0);
  kept_index_.Reshape({static_cast<int>(kept_.size()) > 0 ? static_cast<int>(kept_.size()) : 1});
  slot_of_.Reshape({num > 0 ? num : 1});
  float* kept = kept_index_.mutable_cpu_data();
  float* slot = slot_of_.mutable_cpu_data();
  for (int n = 0; n < num; ++n) slot[n] = -1.f;
  for (size_t i = 0; i < kept_.size(); ++i) {
    kept[i] = static_cast<float>(kept_[i]);
    slot[kept_[i]] = static_cast<float>(i);
  }
  for (size_t k = 0; k < top.size(); ++k) {
    const int64_t count = top[k]->count();
    if (count == 0) continue;
    LaunchKernel(count, FilterGather, count, bottom[k]->count(1), kept_index_.gpu_data(),
                 bottom[k]->gpu_data(), top[k]->mutable_gpu_data());
  }
}

void FilterLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  for (size_t k = 0; k < top.size(); ++k) {
    if (!propagate_down[k]) continue;
    const int64_t count = bottom[k]->count();
    if (count == 0) continue;
    LaunchKernel(count, FilterScatter, count, bottom[k]->count(1), slot_of_.gpu_data(),
                 top[k]->gpu_diff(), bottom[k]->mutable_gpu_diff());
  }
}

}  // namespace pstrain

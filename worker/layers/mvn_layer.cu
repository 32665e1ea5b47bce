// MVN on the GPU: one thread per group takes the group's sums in double (the
// reference's order), then one thread per value applies them.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/mvn_layer.hpp"

namespace pstrain {
namespace {

__global__ void GroupMoments(int64_t groups, int64_t dim, bool normalize, float eps, const float* x,
                             float* mean, float* scale) {
  PSTRAIN_CUDA_KERNEL_LOOP(g, groups) {
    const float* row = x + g * dim;
    double sum = 0;
    for (int64_t j = 0; j < dim; ++j) sum += row[j];
    const float m = static_cast<float>(sum / static_cast<double>(dim));
    float s = 1.f;
    if (normalize) {
      double sq = 0;
      for (int64_t j = 0; j < dim; ++j) sq += static_cast<double>(row[j] - m) * (row[j] - m);
      s = static_cast<float>(sqrt(sq / static_cast<double>(dim))) + eps;
    }
    mean[g] = m;
    scale[g] = s;
  }
}

__global__ void Normalize(int64_t count, int64_t dim, bool normalize, const float* x,
                          const float* mean, const float* scale, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) {
    const int64_t g = i / dim;
    y[i] = normalize ? (x[i] - mean[g]) / scale[g] : x[i] - mean[g];
  }
}

// sums[2g] = mean(dy), sums[2g + 1] = mean(dy * y) over group g.
__global__ void GroupGradSums(int64_t groups, int64_t dim, const float* y, const float* dy,
                              float* sums) {
  PSTRAIN_CUDA_KERNEL_LOOP(g, groups) {
    double sum_dy = 0, sum_dy_y = 0;
    for (int64_t j = g * dim; j < (g + 1) * dim; ++j) {
      sum_dy += dy[j];
      sum_dy_y += static_cast<double>(dy[j]) * y[j];
    }
    sums[2 * g] = static_cast<float>(sum_dy / static_cast<double>(dim));
    sums[2 * g + 1] = static_cast<float>(sum_dy_y / static_cast<double>(dim));
  }
}

__global__ void NormalizeBackward(int64_t count, int64_t dim, bool normalize, const float* y,
                                  const float* dy, const float* sums, const float* scale,
                                  float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) {
    const int64_t g = i / dim;
    dx[i] =
        normalize ? (dy[i] - sums[2 * g] - y[i] * sums[2 * g + 1]) / scale[g] : dy[i] - sums[2 * g];
  }
}

}  // namespace

void MVNLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const caffe::MVNParameter& p = param_.mvn_param();
  const int64_t count = bottom[0]->count();
  if (count == 0) return;
  LaunchKernel(groups_, GroupMoments, groups_, dim_, p.normalize_variance(), p.eps(),
               bottom[0]->gpu_data(), mean_.mutable_gpu_data(), scale_.mutable_gpu_data());
  LaunchKernel(count, Normalize, count, dim_, p.normalize_variance(), bottom[0]->gpu_data(),
               mean_.gpu_data(), scale_.gpu_data(), top[0]->mutable_gpu_data());
}

void MVNLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  const int64_t count = bottom[0]->count();
  if (!propagate_down[0] || count == 0) return;
  const bool normalize = param_.mvn_param().normalize_variance();
  LaunchKernel(groups_, GroupGradSums, groups_, dim_, top[0]->gpu_data(), top[0]->gpu_diff(),
               sums_.mutable_gpu_data());
  LaunchKernel(count, NormalizeBackward, count, dim_, normalize, top[0]->gpu_data(),
               top[0]->gpu_diff(), sums_.gpu_data(), scale_.gpu_data(),
               bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain

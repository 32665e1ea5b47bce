// Reduction on the GPU: one thread per top value sums its row in double (the
// reference's order); the gradient is one kernel over the bottom.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/reduction_layer.hpp"

namespace pstrain {
namespace {

// op: 1 SUM, 2 ASUM, 3 SUMSQ, 4 MEAN (ReductionParameter's values).
__global__ void ReduceRows(int64_t num, int64_t dim, int op, float coeff, const float* x,
                           float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, num) {
    double sum = 0;
    for (int64_t j = i * dim; j < (i + 1) * dim; ++j) {
      sum += op == 2   ? fabs(static_cast<double>(x[j]))
             : op == 3 ? static_cast<double>(x[j]) * x[j]
                       : static_cast<double>(x[j]);
    }
    if (op == 4 && dim > 0) sum /= static_cast<double>(dim);
    y[i] = static_cast<float>(sum) * coeff;
  }
}

__global__ void ReduceBackward(int64_t count, int64_t dim, int op, float scale, const float* x,
                               const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(j, count) {
    const float g = dy[j / dim] * scale;
    dx[j] = op == 2   ? g * static_cast<float>((x[j] > 0.f) - (x[j] < 0.f))
            : op == 3 ? 2.f * g * x[j]
                      : g;
  }
}

}  // namespace

void ReductionLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const caffe::ReductionParameter& p = param_.reduction_param();
  LaunchKernel(num_, ReduceRows, num_, dim_, static_cast<int>(p.operation()), p.coeff(),
               bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
}

void ReductionLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  const int64_t count = bottom[0]->count();
  if (!propagate_down[0] || count == 0) return;
  const caffe::ReductionParameter& p = param_.reduction_param();
  const bool mean = p.operation() == caffe::ReductionParameter::MEAN;
  const float scale = p.coeff() * (mean ? 1.f / static_cast<float>(dim_) : 1.f);
  LaunchKernel(count, ReduceBackward, count, dim_, static_cast<int>(p.operation()), scale,
               bottom[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain

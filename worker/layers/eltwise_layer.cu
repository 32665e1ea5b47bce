// Eltwise on the GPU: own kernels for MAX (index per element kept in
// max_index_gpu_, as float), GpuMul/GpuAxpy chains for PROD and SUM, in the
// reference's order of operations.
#include "worker/layers/eltwise_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__global__ void MaxFirstPair(int64_t n, const float* a, const float* b, float* y, float* index) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const bool first = a[i] > b[i];
    y[i] = first ? a[i] : b[i];
    index[i] = first ? 0.f : 1.f;
  }
}

__global__ void MaxNext(int64_t n, const float* c, float k, float* y, float* index) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    if (c[i] > y[i]) {
      y[i] = c[i];
      index[i] = k;
    }
  }
}

__global__ void MaxBackward(int64_t n, const float* index, float k, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[i] = index[i] == k ? dy[i] : 0.f; }
}

}  // namespace

void EltwiseLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = top[0]->count();
  if (n == 0) return;
  float* y = top[0]->mutable_gpu_data();
  switch (op_) {
    case caffe::EltwiseParameter::PROD:
      GpuMul(n, bottom[0]->gpu_data(), bottom[1]->gpu_data(), y);
      for (size_t k = 2; k < bottom.size(); ++k) GpuMul(n, y, bottom[k]->gpu_data(), y);
      break;
    case caffe::EltwiseParameter::SUM:
      GpuSet(n, 0.f, y);
      for (size_t k = 0; k < bottom.size(); ++k) GpuAxpy(n, coeffs_[k], bottom[k]->gpu_data(), y);
      break;
    case caffe::EltwiseParameter::MAX: {
      max_index_gpu_.ReshapeLike(*top[0]);
      float* index = max_index_gpu_.mutable_gpu_data();
      LaunchKernel(n, MaxFirstPair, n, bottom[0]->gpu_data(), bottom[1]->gpu_data(), y, index);
      for (size_t k = 2; k < bottom.size(); ++k) {
        LaunchKernel(n, MaxNext, n, bottom[k]->gpu_data(), static_cast<float>(k), y, index);
      }
      break;
    }
  }
}

void EltwiseLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  const int64_t n = top[0]->count();
  if (n == 0) return;
  const float* dy = top[0]->gpu_diff();
  for (size_t k = 0; k < bottom.size(); ++k) {
    if (!propagate_down[k]) continue;
    float* dx = bottom[k]->mutable_gpu_diff();
    switch (op_) {
      case caffe::EltwiseParameter::PROD:
        if (stable_prod_grad_) {
          GpuSet(n, 1.f, dx);
          for (size_t j = 0; j < bottom.size(); ++j) {
            if (j != k) GpuMul(n, dx, bottom[j]->gpu_data(), dx);
          }
        } else {
          GpuDiv(n, top[0]->gpu_data(), bottom[k]->gpu_data(), dx);
        }
        GpuMul(n, dx, dy, dx);
        break;
      case caffe::EltwiseParameter::SUM:
        GpuScaleCopy(n, coeffs_[k], dy, dx);
        break;
      case caffe::EltwiseParameter::MAX:
        LaunchKernel(n, MaxBackward, n, max_index_gpu_.gpu_data(), static_cast<float>(k), dy, dx);
        break;
    }
  }
}

}  // namespace pstrain

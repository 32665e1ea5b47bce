// InnerProduct on the GPU: cuBLAS GEMM/GEMV through GpuGemm/GpuGemv, the
// reference's products exactly; the bias is added by a kernel and its
// gradient is a column sum (GpuChannelSum).
#include "worker/layers/inner_product_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

// y[r, j] += bias[j] for a row-major [rows, n] y.
template <typename Index>
__global__ void AddRowBias(Index count, Index n, const float* bias, float* y) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, count) { y[i] += bias[i % n]; }
}

}  // namespace

void InnerProductLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (m_ == 0) return;
  const float* x = bottom[0]->gpu_data();
  const float* w = blobs_[0]->gpu_data();
  float* y = top[0]->mutable_gpu_data();
  if (m_ == 1) {
    if (transpose_) {
      GpuGemv(Trans::kYes, k_, n_, 1.f, w, x, 0.f, y);
    } else {
      GpuGemv(Trans::kNo, n_, k_, 1.f, w, x, 0.f, y);
    }
  } else {
    GpuGemm(Trans::kNo, transpose_ ? Trans::kNo : Trans::kYes, m_, n_, k_, 1.f, x, w, 0.f, y);
  }
  if (bias_term_) {
    const int64_t count = static_cast<int64_t>(m_) * n_;
    LaunchIndexed(count, AddRowBias<uint32_t>, AddRowBias<int64_t>, count, static_cast<int64_t>(n_),
                  blobs_[1]->gpu_data(), y);
  }
}

void InnerProductLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (m_ == 0) return;
  const float* dy = top[0]->gpu_diff();
  if (param_propagate_down(0)) {
    const float* x = bottom[0]->gpu_data();
    float* dw = blobs_[0]->mutable_gpu_diff();
    if (transpose_) {
      GpuGemm(Trans::kYes, Trans::kNo, k_, n_, m_, 1.f, x, dy, 1.f, dw);
    } else {
      GpuGemm(Trans::kYes, Trans::kNo, n_, k_, m_, 1.f, dy, x, 1.f, dw);
    }
  }
  if (bias_term_ && param_propagate_down(1)) {
    GpuChannelSum(m_, n_, 1, dy, nullptr, true, blobs_[1]->mutable_gpu_diff());
  }
  if (propagate_down[0]) {
    GpuGemm(Trans::kNo, transpose_ ? Trans::kYes : Trans::kNo, m_, k_, n_, 1.f, dy,
            blobs_[0]->gpu_data(), 0.f, bottom[0]->mutable_gpu_diff());
  }
}

}  // namespace pstrain

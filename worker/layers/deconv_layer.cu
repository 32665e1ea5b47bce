// Deconvolution on the GPU: the adjoint convolution runs cuDNN (conv_layer.cu);
// here the copies between it and the layer's blobs, the bias and its gradient.
#include "worker/layers/deconv_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

// y[(n C + c) S + s] += bias[c] for an [N, C, S] y.
__global__ void AddChannelBias(int64_t count, int64_t channels, int64_t spatial, const float* bias,
                               float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) { y[i] += bias[(i / spatial) % channels]; }
}

}  // namespace

void DeconvolutionLayer::GpuCopyValues(int64_t n, const float* x, float* y) { GpuCopy(n, x, y); }

void DeconvolutionLayer::GpuAddBias(float* top_data) const {
  const int64_t spatial = static_cast<int64_t>(out_h_) * out_w_;
  const int64_t count = static_cast<int64_t>(num_) * geo_.num_output * spatial;
  LaunchKernel(count, AddChannelBias, count, static_cast<int64_t>(geo_.num_output), spatial,
               blobs_[1]->gpu_data(), top_data);
}

void DeconvolutionLayer::GpuAddBiasGradient(const float* top_diff) {
  GpuChannelSum(num_, geo_.num_output, static_cast<int64_t>(out_h_) * out_w_, top_diff, nullptr,
                true, blobs_[1]->mutable_gpu_diff());
}

void DeconvolutionLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  RunForward(Engine::kGpu, bottom, top);
}

void DeconvolutionLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  RunBackward(Engine::kGpu, top, propagate_down, bottom);
}

std::string DeconvolutionLayer::GpuImplementation() const {
  return adjoint_ != nullptr ? adjoint_->GpuImplementation() : Layer::GpuImplementation();
}

}  // namespace pstrain

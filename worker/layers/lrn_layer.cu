// LRN on the GPU. ACROSS_CHANNELS runs cuDNN's cross-channel LRN (its window
// and alpha / n convention are Caffe's for odd n) when the parameters are in
// cuDNN's ranges (n <= 16, k >= 1e-5, beta >= 0.01); WITHIN_CHANNEL and
// out-of-range parameters run own kernels that follow the reference step by
// step (squares, window sums, scale, power).
#include <climits>
#include <cmath>

#include "worker/layers/cudnn_descriptors.hpp"
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/lrn_layer.hpp"

namespace pstrain {
namespace {

struct LrnShape {
  int channels, height, width;
  int pre;  // (n - 1) / 2
  bool across;
};

__global__ void Square(int64_t n, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = x[i] * x[i]; }
}

// out = sum of `in` over each element's window, clipped at the borders.
__global__ void WindowSumKernel(int64_t n, LrnShape s, const float* in, float* out) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const int w = static_cast<int>(i % s.width);
    const int h = static_cast<int>((i / s.width) % s.height);
    const int c = static_cast<int>((i / (static_cast<int64_t>(s.width) * s.height)) % s.channels);
    const int64_t plane = static_cast<int64_t>(s.height) * s.width;
    float sum = 0.f;
    if (s.across) {
      const float* base = in + i - c * plane;  // channel 0 of this (n, h, w)
      const int lo = max(0, c - s.pre), hi = min(s.channels - 1, c + s.pre);
      for (int j = lo; j <= hi; ++j) sum += base[j * plane];
    } else {
      const float* base = in + (i - h * s.width - w);  // this plane
      const int h0 = max(0, h - s.pre), h1 = min(s.height - 1, h + s.pre);
      const int w0 = max(0, w - s.pre), w1 = min(s.width - 1, w + s.pre);
      for (int y = h0; y <= h1; ++y) {
        for (int x = w0; x <= w1; ++x) sum += base[y * s.width + x];
      }
    }
    out[i] = sum;
  }
}

// scale = k + alpha * scale (the window sums); y = x * scale^-beta.
__global__ void LrnOutput(int64_t n, float k, float alpha, float beta, const float* x, float* scale,
                          float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    scale[i] = k + alpha * scale[i];
    y[i] = x[i] * powf(scale[i], -beta);
  }
}

__global__ void LrnRatio(int64_t n, const float* dy, const float* y, const float* scale,
                         float* ratio) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { ratio[i] = dy[i] * y[i] / scale[i]; }
}

// dx = dy * scale^-beta - factor * x * dx, dx holding the window sums of the ratios.
__global__ void LrnInputGrad(int64_t n, float beta, float factor, const float* x, const float* dy,
                             const float* scale, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[i] = dy[i] * powf(scale[i], -beta) - factor * x[i] * dx[i]; }
}

}  // namespace

struct LrnLayer::CudnnState {
  int num = -1, channels = -1, height = -1, width = -1;
  CudnnTensor data;
  CudnnLrn lrn;
};

void LrnLayer::CudnnStateDeleter::operator()(CudnnState* state) const { delete state; }

// REQUIRES: UsesCudnn(). The LRN descriptor is set once per layer (its
// parameters are fixed at set-up), the tensor when the bottom shape changed.
LrnLayer::CudnnState& LrnLayer::PrepareCudnn() {
  if (!cudnn_) {
    cudnn_.reset(new CudnnState);
    PSTRAIN_CUDNN_CHECK(cudnnSetLRNDescriptor(cudnn_->lrn.get(), size_,
                                              layer_param().lrn_param().alpha(), beta_, k_));
  }
  CudnnState& d = *cudnn_;
  if (d.num != num_ || d.channels != channels_ || d.height != height_ || d.width != width_) {
    SetTensor4d(d.data, num_, channels_, height_, width_);
    d.num = num_;
    d.channels = channels_;
    d.height = height_;
    d.width = width_;
  }
  return d;
}

bool LrnLayer::UsesCudnn() const {
  const caffe::LRNParameter& p = layer_param().lrn_param();
  return across_ && size_ >= CUDNN_LRN_MIN_N && size_ <= CUDNN_LRN_MAX_N && k_ >= CUDNN_LRN_MIN_K &&
         beta_ >= CUDNN_LRN_MIN_BETA && p.alpha() >= 0.f &&
         static_cast<int64_t>(num_) * channels_ * height_ * width_ <= INT_MAX;
}

void LrnLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  if (UsesCudnn()) {
    const CudnnState& d = PrepareCudnn();
    PSTRAIN_CUDNN_CHECK(cudnnLRNCrossChannelForward(
        GpuContext::ForThisThread().cudnn(), d.lrn.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, CudnnOne(),
        d.data.get(), bottom[0]->gpu_data(), CudnnZero(), d.data.get(),
        top[0]->mutable_gpu_data()));
    return;
  }
  const LrnShape shape{channels_, height_, width_, (size_ - 1) / 2, across_};
  float* squares = scratch_.mutable_gpu_data();
  float* scale = scale_.mutable_gpu_data();
  LaunchKernel(n, Square, n, bottom[0]->gpu_data(), squares);
  LaunchKernel(n, WindowSumKernel, n, shape, static_cast<const float*>(squares), scale);
  LaunchKernel(n, LrnOutput, n, k_, alpha_, beta_, bottom[0]->gpu_data(), scale,
               top[0]->mutable_gpu_data());
}

void LrnLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  if (UsesCudnn()) {
    const CudnnState& d = PrepareCudnn();
    PSTRAIN_CUDNN_CHECK(cudnnLRNCrossChannelBackward(
        GpuContext::ForThisThread().cudnn(), d.lrn.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, CudnnOne(),
        d.data.get(), top[0]->gpu_data(), d.data.get(), top[0]->gpu_diff(), d.data.get(),
        bottom[0]->gpu_data(), CudnnZero(), d.data.get(), bottom[0]->mutable_gpu_diff()));
    return;
  }
  const LrnShape shape{channels_, height_, width_, (size_ - 1) / 2, across_};
  float* ratio = scratch_.mutable_gpu_data();
  LaunchKernel(n, LrnRatio, n, top[0]->gpu_diff(), top[0]->gpu_data(), scale_.gpu_data(), ratio);
  float* dx = bottom[0]->mutable_gpu_diff();
  LaunchKernel(n, WindowSumKernel, n, shape, static_cast<const float*>(ratio), dx);
  LaunchKernel(n, LrnInputGrad, n, beta_, 2.f * alpha_ * beta_, bottom[0]->gpu_data(),
               top[0]->gpu_diff(), scale_.gpu_data(), dx);
}

}  // namespace pstrain

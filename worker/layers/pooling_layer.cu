// Pooling on the GPU.
// MAX: own kernels always: the first maximum of a window wins and its flat
// index h * W + w goes to the mask (top 1, or max_index_gpu_), Caffe's rule
// and format, which cuDNN does not promise; Backward gathers per bottom
// element (deterministic, no atomics).
// AVE: cuDNN (count including padding) when no window runs past in + pad, so
// that cuDNN's floor-rounded size and whole-kernel divisor are Caffe's;
// otherwise own kernels with the reference's clipped divisor.
#include <algorithm>
#include <climits>

#include "worker/layers/cudnn_descriptors.hpp"
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/pooling_layer.hpp"

namespace pstrain {
namespace {

struct PoolShape {
  int height, width, pooled_h, pooled_w;
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

template <typename Index>
__global__ void MaxForward(Index n, PoolShape s, const float* x, float* y, float* mask) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, n) {
    const int pw = static_cast<int>(i % s.pooled_w);
    const int ph = static_cast<int>((i / s.pooled_w) % s.pooled_h);
    const Index plane = i / (static_cast<Index>(s.pooled_w) * s.pooled_h);
    const float* in = x + plane * static_cast<Index>(s.height) * s.width;
    const int h0 = max(ph * s.stride_h - s.pad_h, 0);
    const int w0 = max(pw * s.stride_w - s.pad_w, 0);
    const int h1 = min(ph * s.stride_h - s.pad_h + s.kernel_h, s.height);
    const int w1 = min(pw * s.stride_w - s.pad_w + s.kernel_w, s.width);
    int best = h0 * s.width + w0;
    float best_value = in[best];
    for (int h = h0; h < h1; ++h) {
      for (int w = w0; w < w1; ++w) {
        if (in[h * s.width + w] > best_value) {
          best = h * s.width + w;
          best_value = in[best];
        }
      }
    }
    y[i] = best_value;
    mask[i] = static_cast<float>(best);
  }
}

// The pooled rows [*p0, *p1) whose windows (in padded coordinates) hold
// padded position `hp`.
__device__ void Covering(int hp, int kernel, int stride, int pooled, int* p0, int* p1) {
  *p0 = hp < kernel ? 0 : (hp - kernel) / stride + 1;
  *p1 = min(hp / stride + 1, pooled);
}

template <typename Index>
__global__ void MaxBackward(Index n, PoolShape s, const float* dy, const float* mask, float* dx) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, n) {
    const int w = static_cast<int>(i % s.width);
    const int h = static_cast<int>((i / s.width) % s.height);
    const Index plane = i / (static_cast<Index>(s.width) * s.height);
    const Index offset = plane * static_cast<Index>(s.pooled_h) * s.pooled_w;
    int ph0, ph1, pw0, pw1;
    Covering(h + s.pad_h, s.kernel_h, s.stride_h, s.pooled_h, &ph0, &ph1);
    Covering(w + s.pad_w, s.kernel_w, s.stride_w, s.pooled_w, &pw0, &pw1);
    const float self = static_cast<float>(h * s.width + w);
    float grad = 0.f;
    for (int ph = ph0; ph < ph1; ++ph) {
      for (int pw = pw0; pw < pw1; ++pw) {
        const Index o = offset + static_cast<Index>(ph * s.pooled_w + pw);
        if (mask[o] == self) grad += dy[o];
      }
    }
    dx[i] = grad;
  }
}

// The reference's AVE divisor: the window clipped to [-pad, in + pad).
__device__ int PoolSize(const PoolShape& s, int ph, int pw) {
  const int h0 = ph * s.stride_h - s.pad_h, w0 = pw * s.stride_w - s.pad_w;
  const int h1 = min(h0 + s.kernel_h, s.height + s.pad_h);
  const int w1 = min(w0 + s.kernel_w, s.width + s.pad_w);
  return (h1 - h0) * (w1 - w0);
}

template <typename Index>
__global__ void AveForward(Index n, PoolShape s, const float* x, float* y) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, n) {
    const int pw = static_cast<int>(i % s.pooled_w);
    const int ph = static_cast<int>((i / s.pooled_w) % s.pooled_h);
    const Index plane = i / (static_cast<Index>(s.pooled_w) * s.pooled_h);
    const float* in = x + plane * static_cast<Index>(s.height) * s.width;
    const int h0 = max(ph * s.stride_h - s.pad_h, 0);
    const int w0 = max(pw * s.stride_w - s.pad_w, 0);
    const int h1 = min(ph * s.stride_h - s.pad_h + s.kernel_h, s.height);
    const int w1 = min(pw * s.stride_w - s.pad_w + s.kernel_w, s.width);
    float sum = 0.f;
    for (int h = h0; h < h1; ++h) {
      for (int w = w0; w < w1; ++w) sum += in[h * s.width + w];
    }
    y[i] = sum / static_cast<float>(PoolSize(s, ph, pw));
  }
}

template <typename Index>
__global__ void AveBackward(Index n, PoolShape s, const float* dy, float* dx) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, n) {
    const int w = static_cast<int>(i % s.width);
    const int h = static_cast<int>((i / s.width) % s.height);
    const Index plane = i / (static_cast<Index>(s.width) * s.height);
    const Index offset = plane * static_cast<Index>(s.pooled_h) * s.pooled_w;
    int ph0, ph1, pw0, pw1;
    Covering(h + s.pad_h, s.kernel_h, s.stride_h, s.pooled_h, &ph0, &ph1);
    Covering(w + s.pad_w, s.kernel_w, s.stride_w, s.pooled_w, &pw0, &pw1);
    float grad = 0.f;
    for (int ph = ph0; ph < ph1; ++ph) {
      for (int pw = pw0; pw < pw1; ++pw) {
        grad += dy[offset + static_cast<Index>(ph * s.pooled_w + pw)] /
                static_cast<float>(PoolSize(s, ph, pw));
      }
    }
    dx[i] = grad;
  }
}

// Launches the 32-bit instance of a pooling kernel when the bottom and the
// top both have fewer than 2^31 elements, the 64-bit one otherwise.
template <typename... P32, typename... P64, typename... Args>
void LaunchPool(const Blob& bottom, const Blob& top, int64_t n, void (*kernel32)(P32...),
                void (*kernel64)(P64...), Args... args) {
  if (Fits32BitIndex(std::max(bottom.count(), top.count()))) {
    LaunchKernel(n, kernel32, args...);
  } else {
    LaunchKernel(n, kernel64, args...);
  }
}

}  // namespace

// LEGACY begin: cuDNN 9 deprecates the pooling descriptor and calls; they
// stay until the graph API's pooling is shown to match (docs/architecture.md).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace pooling_cudnn {
using CudnnPooling = CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                                     cudnnDestroyPoolingDescriptor>;
}  // namespace pooling_cudnn

// Descriptors of a cuDNN AVE pooling that computes exactly Caffe's output,
// for one bottom shape.
struct PoolingLayer::CudnnState {
  int num = -1, channels = -1, height = -1, width = -1;
  CudnnTensor x, y;
  pooling_cudnn::CudnnPooling pool;
};

void PoolingLayer::CudnnStateDeleter::operator()(CudnnState* state) const { delete state; }

// cuDNN only where its size rule and divisor are Caffe's: no window runs past
// in + pad (then cuDNN's floor rule gives Caffe's count and every divisor is
// the whole kernel), and the tensors fit cuDNN's int sizes.
bool PoolingLayer::AveUsesCudnn() const {
  const int right_h = (pooled_h_ - 1) * stride_h_ + kernel_h_ - height_ - pad_h_;
  const int right_w = (pooled_w_ - 1) * stride_w_ + kernel_w_ - width_ - pad_w_;
  return !max_ && right_h <= pad_h_ && right_w <= pad_w_ &&
         static_cast<int64_t>(num_) * channels_ * height_ * width_ <= INT_MAX;
}

// REQUIRES: AveUsesCudnn(). The descriptors are created once per layer and
// set again only when the bottom shape changed.
PoolingLayer::CudnnState& PoolingLayer::PrepareCudnn() {
  if (cudnn_ && cudnn_->num == num_ && cudnn_->channels == channels_ && cudnn_->height == height_ &&
      cudnn_->width == width_) {
    return *cudnn_;
  }
  if (!cudnn_) cudnn_.reset(new CudnnState);
  CudnnState& d = *cudnn_;
  // Global pooling's kernel follows the bottom shape: set with it.
  PSTRAIN_CUDNN_CHECK(cudnnSetPooling2dDescriptor(
      d.pool.get(), CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, CUDNN_PROPAGATE_NAN, kernel_h_,
      kernel_w_, pad_h_, pad_w_, stride_h_, stride_w_));
  SetTensor4d(d.x, num_, channels_, height_, width_);
  SetTensor4d(d.y, num_, channels_, pooled_h_, pooled_w_);
  d.num = num_;
  d.channels = channels_;
  d.height = height_;
  d.width = width_;
  return d;
}

void PoolingLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = top[0]->count();
  if (n == 0 || bottom[0]->count() == 0) return;
  const PoolShape s{height_,   width_,    pooled_h_, pooled_w_, kernel_h_,
                    kernel_w_, stride_h_, stride_w_, pad_h_,    pad_w_};
  if (max_) {
    float* mask = top.size() > 1 ? top[1]->mutable_gpu_data() : nullptr;
    if (mask == nullptr) {
      max_index_gpu_.ReshapeLike(*top[0]);
      mask = max_index_gpu_.mutable_gpu_data();
    }
    LaunchPool(*bottom[0], *top[0], n, MaxForward<uint32_t>, MaxForward<int64_t>, n, s,
               bottom[0]->gpu_data(), top[0]->mutable_gpu_data(), mask);
  } else if (AveUsesCudnn()) {
    const CudnnState& d = PrepareCudnn();
    PSTRAIN_CUDNN_CHECK(cudnnPoolingForward(GpuContext::ForThisThread().cudnn(), d.pool.get(),
                                            CudnnOne(), d.x.get(), bottom[0]->gpu_data(),
                                            CudnnZero(), d.y.get(), top[0]->mutable_gpu_data()));
  } else {
    LaunchPool(*bottom[0], *top[0], n, AveForward<uint32_t>, AveForward<int64_t>, n, s,
               bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
  }
}

void PoolingLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  float* dx = bottom[0]->mutable_gpu_diff();
  if (top[0]->count() == 0) {
    GpuSet(n, 0.f, dx);
    return;
  }
  const PoolShape s{height_,   width_,    pooled_h_, pooled_w_, kernel_h_,
                    kernel_w_, stride_h_, stride_w_, pad_h_,    pad_w_};
  if (max_) {
    const float* mask = top.size() > 1 ? top[1]->gpu_data() : max_index_gpu_.gpu_data();
    LaunchPool(*bottom[0], *top[0], n, MaxBackward<uint32_t>, MaxBackward<int64_t>, n, s,
               top[0]->gpu_diff(), mask, dx);
  } else if (AveUsesCudnn()) {
    const CudnnState& d = PrepareCudnn();
    PSTRAIN_CUDNN_CHECK(cudnnPoolingBackward(GpuContext::ForThisThread().cudnn(), d.pool.get(),
                                             CudnnOne(), d.y.get(), top[0]->gpu_data(), d.y.get(),
                                             top[0]->gpu_diff(), d.x.get(), bottom[0]->gpu_data(),
                                             CudnnZero(), d.x.get(), dx));
  } else {
    LaunchPool(*bottom[0], *top[0], n, AveBackward<uint32_t>, AveBackward<int64_t>, n, s,
               top[0]->gpu_diff(), dx);
  }
}

}  // namespace pstrain

#pragma GCC diagnostic pop
// LEGACY end.

// Convolution on the GPU: cuDNN. Descriptors, algorithms and the workspace
// are built for a bottom shape and kept until it changes. Algorithms come
// from cuDNN's heuristics (cudnnGet*Algorithm_v7): the first deterministic
// one whose workspace fits kMaxWorkspace, else the first that fits. The math
// is plain FP32 (CUDNN_FMA_MATH: no TF32 tensor cores, which would miss the
// reference by ~1e-3). Groups via the group count, dilation via the
// descriptor; the bias is added with cudnnAddTensor and its gradient comes
// from cudnnConvolutionBackwardBias.
#include <algorithm>
#include <vector>

#include "common/cuda/device_allocator.hpp"
#include "worker/layers/conv_layer.hpp"
#include "worker/layers/cudnn_descriptors.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

constexpr size_t kMaxWorkspace = size_t{256} << 20;

// The heuristics' choice among `perf` (best first), or `fallback` when none
// succeeds within the workspace bound.
template <typename Perf, typename Algo>
Algo PickAlgorithm(const std::vector<Perf>& perf, int count, Algo fallback) {
  for (bool deterministic_only : {true, false}) {
    for (int i = 0; i < count; ++i) {
      const Perf& p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxWorkspace) continue;
      if (p.mathType == CUDNN_TENSOR_OP_MATH ||
          p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) {
        continue;
      }
      if (deterministic_only && p.determinism != CUDNN_DETERMINISTIC) continue;
      return p.algo;
    }
  }
  return fallback;
}

}  // namespace

struct ConvolutionLayer::CudnnConv {
  int num = 0, height = 0, width = 0;  // the bottom shape all this is for
  CudnnTensor x, y, bias;
  CudnnFilter w;
  CudnnConvolution conv;
  cudnnConvolutionFwdAlgo_t forward_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  cudnnConvolutionBwdFilterAlgo_t filter_algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  void* workspace = nullptr;  // from DeviceAlloc, owned
  size_t workspace_bytes = 0;

  CudnnConv() = default;
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;
  ~CudnnConv() {
    if (workspace != nullptr) DeviceFree(workspace);
  }
};

void ConvolutionLayer::CudnnConvDeleter::operator()(CudnnConv* conv) const { delete conv; }

ConvolutionLayer::CudnnConv& ConvolutionLayer::PrepareCudnn() {
  if (cudnn_ && cudnn_->num == num_ && cudnn_->height == height_ && cudnn_->width == width_) {
    return *cudnn_;
  }
  cudnn_.reset();  // frees the old workspace first
  std::unique_ptr<CudnnConv, CudnnConvDeleter> c(new CudnnConv);
  c->num = num_;
  c->height = height_;
  c->width = width_;
  SetTensor4d(c->x, num_, channels_, height_, width_);
  SetTensor4d(c->y, num_, geo_.num_output, out_h_, out_w_);
  SetTensor4d(c->bias, 1, geo_.num_output, 1, 1);
  PSTRAIN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(c->w.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                 geo_.num_output, channels_ / geo_.group,
                                                 geo_.kernel_h, geo_.kernel_w));
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      c->conv.get(), geo_.pad_h, geo_.pad_w, geo_.stride_h, geo_.stride_w, geo_.dilation_h,
      geo_.dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(c->conv.get(), geo_.group));
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(c->conv.get(), CUDNN_FMA_MATH));
  int n = 0, ch = 0, h = 0, w = 0;
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(c->conv.get(), c->x.get(), c->w.get(),
                                                            &n, &ch, &h, &w));
  PSTRAIN_CHECK_MSG(n == num_ && ch == geo_.num_output && h == out_h_ && w == out_w_,
                    "cuDNN's output size differs from the layer's");

  cudnnHandle_t handle = GpuContext::ForThisThread().cudnn();
  int max_count = 0, count = 0;
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(std::max(max_count, 1));
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
      handle, c->x.get(), c->w.get(), c->conv.get(), c->y.get(), max_count, &count, fwd.data()));
  c->forward_algo = PickAlgorithm(fwd, count, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> data(std::max(max_count, 1));
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
      handle, c->w.get(), c->y.get(), c->conv.get(), c->x.get(), max_count, &count, data.data()));
  c->data_algo = PickAlgorithm(data, count, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> filter(std::max(max_count, 1));
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      handle, c->x.get(), c->y.get(), c->conv.get(), c->w.get(), max_count, &count, filter.data()));
  c->filter_algo = PickAlgorithm(filter, count, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);

  size_t forward_bytes = 0, data_bytes = 0, filter_bytes = 0;
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
      handle, c->x.get(), c->w.get(), c->conv.get(), c->y.get(), c->forward_algo, &forward_bytes));
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
      handle, c->w.get(), c->y.get(), c->conv.get(), c->x.get(), c->data_algo, &data_bytes));
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
      handle, c->x.get(), c->y.get(), c->conv.get(), c->w.get(), c->filter_algo, &filter_bytes));
  c->workspace_bytes = std::max({forward_bytes, data_bytes, filter_bytes});
  if (c->workspace_bytes > 0) c->workspace = DeviceAlloc(c->workspace_bytes);
  cudnn_ = std::move(c);
  return *cudnn_;
}

void ConvolutionLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (num_ == 0) return;
  CudnnConv& c = PrepareCudnn();
  cudnnHandle_t handle = GpuContext::ForThisThread().cudnn();
  const float* weights = blobs_[0]->gpu_data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    float* y = top[i]->mutable_gpu_data();
    PSTRAIN_CUDNN_CHECK(cudnnConvolutionForward(
        handle, CudnnOne(), c.x.get(), bottom[i]->gpu_data(), c.w.get(), weights, c.conv.get(),
        c.forward_algo, c.workspace, c.workspace_bytes, CudnnZero(), c.y.get(), y));
    if (geo_.bias_term) {
      PSTRAIN_CUDNN_CHECK(cudnnAddTensor(handle, CudnnOne(), c.bias.get(), blobs_[1]->gpu_data(),
                                         CudnnOne(), c.y.get(), y));
    }
  }
}

void ConvolutionLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (num_ == 0) return;
  CudnnConv& c = PrepareCudnn();
  cudnnHandle_t handle = GpuContext::ForThisThread().cudnn();
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = geo_.bias_term && param_propagate_down(1);
  for (size_t i = 0; i < top.size(); ++i) {
    const float* dy = top[i]->gpu_diff();
    if (bias_grad) {
      PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardBias(handle, CudnnOne(), c.y.get(), dy,
                                                       CudnnOne(), c.bias.get(),
                                                       blobs_[1]->mutable_gpu_diff()));
    }
    if (weight_grad) {
      PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          handle, CudnnOne(), c.x.get(), bottom[i]->gpu_data(), c.y.get(), dy, c.conv.get(),
          c.filter_algo, c.workspace, c.workspace_bytes, CudnnOne(), c.w.get(),
          blobs_[0]->mutable_gpu_diff()));
    }
    if (propagate_down[i]) {
      PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(
          handle, CudnnOne(), c.w.get(), blobs_[0]->gpu_data(), c.y.get(), dy, c.conv.get(),
          c.data_algo, c.workspace, c.workspace_bytes, CudnnZero(), c.x.get(),
          bottom[i]->mutable_gpu_diff()));
    }
  }
}

}  // namespace pstrain

// ArgMax on the GPU: one thread per instance picks its top_k by k passes,
// each taking the largest (value, index) pair below the last one taken: the
// reference's order (larger value first, then larger index).
#include "worker/layers/argmax_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__device__ bool Ranks(float v, int64_t j, float w, int64_t k) { return v > w || (v == w && j > k); }

__global__ void ArgMaxForward(int64_t num, int64_t dim, int64_t stride, int top_k, bool values,
                              bool has_axis, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, num) {
    const int64_t outer = i / stride, inner = i % stride;
    const float* row = x + outer * dim * stride + inner;
    float last_value = 0.f;
    int64_t last_index = -1;
    for (int k = 0; k < top_k; ++k) {
      float best_value = 0.f;
      int64_t best = -1;
      for (int64_t j = 0; j < dim; ++j) {
        const float v = row[j * stride];
        if (last_index >= 0 && !Ranks(last_value, last_index, v, j)) continue;
        if (best < 0 || Ranks(v, j, best_value, best)) {
          best = j;
          best_value = v;
        }
      }
      last_value = best_value;
      last_index = best;
      const float index = static_cast<float>(best);
      if (has_axis) {
        y[(outer * top_k + k) * stride + inner] = values ? best_value : index;
      } else if (values) {
        y[2 * i * top_k + k] = index;
        y[2 * i * top_k + top_k + k] = best_value;
      } else {
        y[i * top_k + k] = index;
      }
    }
  }
}

}  // namespace

void ArgMaxLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const caffe::ArgMaxParameter& p = param_.argmax_param();
  LaunchKernel(num_, ArgMaxForward, num_, dim_, stride_, top_k_, p.out_max_val(), p.has_axis(),
               bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
}

}  // namespace pstrain

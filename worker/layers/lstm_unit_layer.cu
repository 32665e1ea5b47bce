// LSTMUnit on the GPU: one thread per (stream, hidden unit), the reference's
// arithmetic.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/lstm_unit_layer.hpp"

namespace pstrain {
namespace {

__device__ float SigmoidDev(float x) { return 1.f / (1.f + expf(-x)); }

__global__ void LstmUnitForward(int64_t count, int dim, const float* c_prev, const float* x,
                                const float* cont, float* c, float* h) {
  PSTRAIN_CUDA_KERNEL_LOOP(k, count) {
    const int64_t n = k / dim;
    const int64_t d = k % dim;
    const float* xn = x + n * 4 * dim;
    const float i = SigmoidDev(xn[d]);
    const float f = cont[n] == 0.f ? 0.f : cont[n] * SigmoidDev(xn[dim + d]);
    const float o = SigmoidDev(xn[2 * dim + d]);
    const float g = tanhf(xn[3 * dim + d]);
    const float ck = f * c_prev[k] + i * g;
    c[k] = ck;
    h[k] = o * tanhf(ck);
  }
}

__global__ void LstmUnitBackward(int64_t count, int dim, const float* c_prev, const float* x,
                                 const float* cont, const float* c, const float* dc,
                                 const float* dh, float* dc_prev, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(k, count) {
    const int64_t n = k / dim;
    const int64_t d = k % dim;
    const float* xn = x + n * 4 * dim;
    float* dxn = dx + n * 4 * dim;
    const float i = SigmoidDev(xn[d]);
    const float f = cont[n] == 0.f ? 0.f : cont[n] * SigmoidDev(xn[dim + d]);
    const float o = SigmoidDev(xn[2 * dim + d]);
    const float g = tanhf(xn[3 * dim + d]);
    const float tanh_c = tanhf(c[k]);
    const float dc_total = dc[k] + dh[k] * o * (1.f - tanh_c * tanh_c);
    dc_prev[k] = dc_total * f;
    dxn[d] = dc_total * g * i * (1.f - i);
    dxn[dim + d] = dc_total * c_prev[k] * f * (1.f - f);
    dxn[2 * dim + d] = dh[k] * tanh_c * o * (1.f - o);
    dxn[3 * dim + d] = dc_total * i * (1.f - g * g);
  }
}

}  // namespace

void LSTMUnitLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = static_cast<int64_t>(num_) * hidden_dim_;
  LaunchKernel(count, LstmUnitForward, count, hidden_dim_, bottom[0]->gpu_data(),
               bottom[1]->gpu_data(), bottom[2]->gpu_data(), top[0]->mutable_gpu_data(),
               top[1]->mutable_gpu_data());
}

void LSTMUnitLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  if (!propagate_down[0] && !propagate_down[1]) return;
  const int64_t count = static_cast<int64_t>(num_) * hidden_dim_;
  LaunchKernel(count, LstmUnitBackward, count, hidden_dim_, bottom[0]->gpu_data(),
               bottom[1]->gpu_data(), bottom[2]->gpu_data(), top[0]->gpu_data(), top[0]->gpu_diff(),
               top[1]->gpu_diff(), bottom[0]->mutable_gpu_diff(), bottom[1]->mutable_gpu_diff());
}

}  // namespace pstrain

// The update-rule kernels: per element the float operations of the CPU rules
// (common/optim/*.cpp) in the same order. Built with PSTRAIN_CUDA_EXACT_FLAGS
// (-fmad=false) so no multiply-add is contracted; sqrtf and '/' are IEEE
// (no --use_fast_math), so each result rounds as on the CPU.
#include "common/cuda/cuda_check.hpp"
#include "common/cuda/math_gpu.hpp"
#include "common/cuda/update_kernels.hpp"

namespace pstrain::optim::gpu {
namespace {

// diff *= grad_scale; diff += decay * data (L2) or decay * sign(data) (L1).
__device__ __forceinline__ float ScaledRegularized(const UpdateScalars& s, float g, float w) {
  if (s.grad_scale != 1.f) g *= s.grad_scale;
  if (s.local_decay != 0.f) {
    if (s.l1) {
      g += s.local_decay * static_cast<float>((0.f < w) - (w < 0.f));
    } else {
      g += s.local_decay * w;
    }
  }
  return g;
}

template <RuleKind kKind>
__global__ void UpdateKernel(UpdateScalars s, float* data, float* diff, float* h0, float* h1,
                             int64_t n) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const float w = data[i];
    float g = ScaledRegularized(s, diff[i], w);
    if constexpr (kKind == RuleKind::kSgd) {
      // h = local_rate * g + momentum * h; g = h.
      const float h = s.local_rate * g + s.a * h0[i];
      h0[i] = h;
      g = h;
    } else if constexpr (kKind == RuleKind::kNesterov) {
      // h' = local_rate * g + momentum * h; g = (1 + momentum) * h' + (-momentum) * h.
      const float h_old = h0[i];
      const float h = s.local_rate * g + s.a * h_old;
      h0[i] = h;
      g = s.b * h + (-s.a) * h_old;
    } else if constexpr (kKind == RuleKind::kAdaGrad) {
      const float h = g * g + h0[i];
      h0[i] = h;
      g = s.local_rate * (g / (sqrtf(h) + s.delta));
    } else if constexpr (kKind == RuleKind::kRmsProp) {
      const float h = s.b * (g * g) + s.a * h0[i];
      h0[i] = h;
      g = s.local_rate * (g / (sqrtf(h) + s.delta));
    } else if constexpr (kKind == RuleKind::kAdaDelta) {
      const float grad_sq = s.b * (g * g) + s.a * h0[i];
      h0[i] = grad_sq;
      const float update_sq_old = h1[i];
      g = g * sqrtf((s.delta + update_sq_old) / (s.delta + grad_sq));
      h1[i] = s.b * (g * g) + s.a * update_sq_old;
      g = s.local_rate * g;
    } else {  // kAdam: h0 = m, h1 = v, local_rate already holds the bias correction
      const float m = s.b * g + s.a * h0[i];
      const float v = s.d * (g * g) + s.c * h1[i];
      h0[i] = m;
      h1[i] = v;
      g = s.local_rate * (m / (sqrtf(v) + s.delta));
    }
    diff[i] = g;
    data[i] = w - g;
  }
}

template <RuleKind kKind>
void Launch(const UpdateScalars& s, float* data, float* diff, float* h0, float* h1, int64_t n,
            cudaStream_t stream) {
  UpdateKernel<kKind><<<CudaBlocks(n), kCudaThreads, 0, stream>>>(s, data, diff, h0, h1, n);
  PSTRAIN_CUDA_KERNEL_CHECK();
}

}  // namespace

void LaunchUpdate(RuleKind kind, const UpdateScalars& s, float* data, float* diff, float* h0,
                  float* h1, int64_t n, cudaStream_t stream) {
  switch (kind) {
    case RuleKind::kSgd:
      return Launch<RuleKind::kSgd>(s, data, diff, h0, h1, n, stream);
    case RuleKind::kNesterov:
      return Launch<RuleKind::kNesterov>(s, data, diff, h0, h1, n, stream);
    case RuleKind::kAdaGrad:
      return Launch<RuleKind::kAdaGrad>(s, data, diff, h0, h1, n, stream);
    case RuleKind::kRmsProp:
      return Launch<RuleKind::kRmsProp>(s, data, diff, h0, h1, n, stream);
    case RuleKind::kAdaDelta:
      return Launch<RuleKind::kAdaDelta>(s, data, diff, h0, h1, n, stream);
    case RuleKind::kAdam:
      return Launch<RuleKind::kAdam>(s, data, diff, h0, h1, n, stream);
  }
}

namespace {

// Each block adds the squares of its grid-stride share of x, summed in double
// in shared memory, to *sum with one atomic add.
__global__ void SumSquaresKernel(const float* x, int64_t n, double* sum) {
  __shared__ double partial[kCudaThreads];
  double own = 0.0;
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const double v = x[i];
    own += v * v;
  }
  partial[threadIdx.x] = own;
  __syncthreads();
  for (unsigned step = blockDim.x / 2; step > 0; step /= 2) {
    if (threadIdx.x < step) partial[threadIdx.x] += partial[threadIdx.x + step];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, partial[0]);
}

}  // namespace

void LaunchAddSumSquares(const float* x, int64_t n, double* sum, cudaStream_t stream) {
  if (n <= 0) return;
  SumSquaresKernel<<<CudaBlocks(n), kCudaThreads, 0, stream>>>(x, n, sum);
  PSTRAIN_CUDA_KERNEL_CHECK();
}

}  // namespace pstrain::optim::gpu

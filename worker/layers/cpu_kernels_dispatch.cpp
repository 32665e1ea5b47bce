// Dispatch of the pooling, LRN, fused BatchNorm + Scale and InnerProduct kernels to the variant
// KernelIsa() names.
#include "worker/layers/batch_norm_cpu_kernels.hpp"
#include "worker/layers/cpu_kernel_isa.hpp"
#include "worker/layers/cpu_kernels_variants.hpp"
#include "worker/layers/inner_product_cpu_kernels.hpp"
#include "worker/layers/lrn_cpu_kernels.hpp"
#include "worker/layers/pooling_cpu_kernels.hpp"

namespace pstrain {

#define PSTRAIN_DISPATCH(function, ...)       \
  do {                                        \
    const CpuIsa isa = KernelIsa();           \
    NoteKernelIsa(isa);                       \
    switch (isa) {                            \
      case CpuIsa::kAvx512:                   \
        return avx512::function(__VA_ARGS__); \
      case CpuIsa::kAvx2:                     \
        return avx2::function(__VA_ARGS__);   \
      case CpuIsa::kGeneric:                  \
        break;                                \
    }                                         \
    return generic::function(__VA_ARGS__);    \
  } while (0)

void MaxPoolForward(const PoolShape& shape, const float* in, float* out, int* argmax) {
  PSTRAIN_DISPATCH(MaxPoolForward, shape, in, out, argmax);
}

void MaxPoolBackward(const PoolShape& shape, const float* dout, const int* argmax, float* din) {
  PSTRAIN_DISPATCH(MaxPoolBackward, shape, dout, argmax, din);
}

void AvePoolForward(const PoolShape& shape, const float* in, float* out) {
  PSTRAIN_DISPATCH(AvePoolForward, shape, in, out);
}

void AvePoolBackward(const PoolShape& shape, const float* dout, float* din) {
  PSTRAIN_DISPATCH(AvePoolBackward, shape, dout, din);
}

void LrnAcrossForward(const LrnShape& shape, const float* x, float* scale, float* power,
                      float* top) {
  PSTRAIN_DISPATCH(LrnAcrossForward, shape, x, scale, power, top);
}

void LrnAcrossBackward(const LrnShape& shape, const float* x, const float* top,
                       const float* top_diff, const float* scale, const float* power,
                       float* bottom_diff) {
  PSTRAIN_DISPATCH(LrnAcrossBackward, shape, x, top, top_diff, scale, power, bottom_diff);
}

void BnScaleForward(const BnShape& shape, bool batch_stats, float eps, BnRelu relu, const float* x,
                    const float* gamma, const float* beta, float* mean, float* variance, float* sd,
                    float* x_norm, float* y) {
  PSTRAIN_DISPATCH(BnScaleForward, shape, batch_stats, eps, relu, x, gamma, beta, mean, variance,
                   sd, x_norm, y);
}

void BnScaleBackward(const BnShape& shape, bool batch_stats, BnRelu relu, const float* y,
                     const float* dy, const float* x_norm, const float* gamma, const float* sd,
                     float* gamma_diff, float* beta_diff, float* dx) {
  PSTRAIN_DISPATCH(BnScaleBackward, shape, batch_stats, relu, y, dy, x_norm, gamma, sd, gamma_diff,
                   beta_diff, dx);
}

void FcForward(const FcShape& shape, const float* x, const float* w, const float* bias, float* y) {
  PSTRAIN_DISPATCH(FcForward, shape, x, w, bias, y);
}

void FcBackwardData(const FcShape& shape, const float* dy, const float* w, float* dx) {
  PSTRAIN_DISPATCH(FcBackwardData, shape, dy, w, dx);
}

void FcBackwardWeights(const FcShape& shape, const float* dy, const float* x, float* dw) {
  PSTRAIN_DISPATCH(FcBackwardWeights, shape, dy, x, dw);
}

}  // namespace pstrain

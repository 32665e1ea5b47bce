// The per-ISA copies of the pooling, LRN, fused BatchNorm + Scale and InnerProduct kernels
// (cpu_kernels_generic.cpp, cpu_kernels_avx2.cpp, cpu_kernels_avx512.cpp), each in its own
// namespace; cpu_kernels_dispatch.cpp call the one KernelIsa() names. Internal to worker/layers/.
#pragma once

#include "worker/layers/batch_norm_cpu_kernels.hpp"
#include "worker/layers/inner_product_cpu_kernels.hpp"
#include "worker/layers/lrn_cpu_kernels.hpp"
#include "worker/layers/pooling_cpu_kernels.hpp"

#define PSTRAIN_DECLARE_CPU_KERNELS(isa)                                                          \
  namespace pstrain::isa {                                                                        \
  void MaxPoolForward(const PoolShape& shape, const float* in, float* out, int* argmax);          \
  void MaxPoolBackward(const PoolShape& shape, const float* dout, const int* argmax, float* din); \
  void AvePoolForward(const PoolShape& shape, const float* in, float* out);                       \
  void AvePoolBackward(const PoolShape& shape, const float* dout, float* din);                    \
  void LrnAcrossForward(const LrnShape& shape, const float* x, float* scale, float* power,        \
                        float* top);                                                              \
  void LrnAcrossBackward(const LrnShape& shape, const float* x, const float* top,                 \
                         const float* top_diff, const float* scale, const float* power,           \
                         float* bottom_diff);                                                     \
  void BnScaleForward(const BnShape& shape, bool batch_stats, float eps, BnRelu relu,             \
                      const float* x, const float* gamma, const float* beta, float* mean,         \
                      float* variance, float* sd, float* x_norm, float* y);                       \
  void BnScaleBackward(const BnShape& shape, bool batch_stats, BnRelu relu, const float* y,       \
                       const float* dy, const float* x_norm, const float* gamma, const float* sd, \
                       float* gamma_diff, float* beta_diff, float* dx);                           \
  void FcForward(const FcShape& shape, const float* x, const float* w, const float* bias,         \
                 float* y);                                                                       \
  void FcBackwardData(const FcShape& shape, const float* dy, const float* w, float* dx);          \
  void FcBackwardWeights(const FcShape& shape, const float* dy, const float* x, float* dw);       \
  }

PSTRAIN_DECLARE_CPU_KERNELS(generic)
PSTRAIN_DECLARE_CPU_KERNELS(avx2)
PSTRAIN_DECLARE_CPU_KERNELS(avx512)

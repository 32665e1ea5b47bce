// BatchNorm followed by a per-channel Scale (and a ReLU), as one pass per
// direction: the CPU kernels of the fused layers (docs/architecture.md,
// "BatchNorm and Scale fused"), on N x C x spatial float blobs.
//
// Forward: with batch statistics, each channel's mean and biased variance
// (summed in double, the deviations from the double mean in a second pass:
// the reference's arithmetic, in another order); then, per element,
//   x_norm = (x - mean) / sd,   sd = sqrt(variance + eps)
//   y      = x_norm * gamma + beta          (beta 0 when null)
//   y      = y > 0 ? y : slope * y          (with a ReLU)
// Backward: with a ReLU, dy is first gated by the ReLU's output y:
// dy = y > 0 ? dy : slope * dy (Caffe's in-place ReLU backward). Then, per
// channel, in double, S = sum dy and P = sum dy * x_norm;
//   gamma_diff += P, beta_diff += S         (each when not null)
//   dx = gamma / sd * (dy - S / m - P / m * x_norm)   (batch statistics)
//   dx = gamma / sd * dy                               (global statistics)
// with m = N * spatial; this is (ReLU's,) Scale's and BatchNorm's backward.
// Channels are spread over OpenMP threads (SetCpuThreads); each channel's
// passes follow one another while its values are still in cache. Variants
// per ISA: cpu_kernel_isa.hpp.
#pragma once

#include <cstdint>

namespace pstrain {

struct BnShape {
  int64_t num = 0, channels = 0, spatial = 0;
};

// The ReLU after the Scale, when fused too.
struct BnRelu {
  bool on = false;
  float slope = 0.f;  // Caffe's negative_slope
};

// REQUIRES: x, x_norm, y hold num * channels * spatial floats (y may alias x);
// gamma, mean, variance, sd hold `channels`; beta is null or holds `channels`.
// With batch_stats, mean and variance are written; otherwise read.
void BnScaleForward(const BnShape& shape, bool batch_stats, float eps, BnRelu relu, const float* x,
                    const float* gamma, const float* beta, float* mean, float* variance, float* sd,
                    float* x_norm, float* y);
// REQUIRES: x_norm and sd as the last BnScaleForward left them; dy, x_norm
// and dx hold num * channels * spatial floats (dx may alias dy), and so does
// y (the forward's output) with relu.on; gamma_diff, beta_diff and dx may
// each be null (not wanted).
void BnScaleBackward(const BnShape& shape, bool batch_stats, BnRelu relu, const float* y,
                     const float* dy, const float* x_norm, const float* gamma, const float* sd,
                     float* gamma_diff, float* beta_diff, float* dx);

}  // namespace pstrain

// Pooling's own vectorised CPU kernels (PoolingLayer's "vector"
// implementation), on NCHW float planes with Caffe's semantics
// (pooling_layer.hpp): MAX takes the first maximum of each window in row-major
// order and records its flat index h * W + w in the input plane; AVE divides
// by the window clipped to [-pad, in + pad) before clipping to the input.
// The geometry (pooled sizes, the dropped last window) comes from the layer.
//
// How they vectorise: groups of planes are copied into stride_h x stride_w
// phases of the padded input (padding -inf for MAX, +0 for AVE), where each
// window element of every output of the group sits at one fixed offset from
// the output's position; each window element is then one long loop over the
// group's outputs (pooling_cpu_kernels.inc). Each window is still scanned in
// the reference's order with a strict `>`, so MAX (values and argmax) and AVE
// forward are bitwise the reference's results (global AVE sums in 16 partial
// sums); AVE backward adds the same terms in another order.
// Groups of planes are spread over OpenMP threads (SetCpuThreads).
// Variants per ISA: cpu_kernel_isa.hpp; each call runs KernelIsa().
#pragma once

#include <cstdint>

namespace pstrain {

struct PoolShape {
  int64_t planes = 0;  // N * C
  int height = 0, width = 0;
  int pooled_h = 0, pooled_w = 0;
  int kernel_h = 0, kernel_w = 0;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
};

// REQUIRES (all): buffers of planes * (height * width) inputs and
// planes * (pooled_h * pooled_w) outputs; every window holds an input element.
void MaxPoolForward(const PoolShape& shape, const float* in, float* out, int* argmax);
// din = 0, then din[argmax[o]] += dout[o] per plane, in output order.
void MaxPoolBackward(const PoolShape& shape, const float* dout, const int* argmax, float* din);
void AvePoolForward(const PoolShape& shape, const float* in, float* out);
void AvePoolBackward(const PoolShape& shape, const float* dout, float* din);

}  // namespace pstrain

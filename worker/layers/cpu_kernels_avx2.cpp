// The pooling, LRN, fused BatchNorm + Scale and InnerProduct kernels compiled for avx2 (-mavx2
// -mfma; set in worker/CMakeLists.txt, with -fno-math-errno so square roots vectorise). Only
// cpu_kernels_dispatch.cpp calls into this namespace, and only when KernelIsa() names it.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/layers/cpu_kernels_variants.hpp"

namespace pstrain::avx2 {
#include "worker/layers/pooling_cpu_kernels.inc"

// After the pooling body: uses its Scratch, MinInt, MaxInt and AddInto.
#include "worker/layers/lrn_cpu_kernels.inc"
// Uses nothing of the bodies above.
#include "worker/layers/batch_norm_cpu_kernels.inc"
// Uses nothing of the bodies above.
#include "worker/layers/inner_product_cpu_kernels.inc"
}  // namespace pstrain::avx2

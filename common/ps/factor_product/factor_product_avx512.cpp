// FactorProduct for avx512 (common/ps/factor_product/kernel.inc): 16 floats a
// vector, tiles of 4 vectors. Compiled with -ffp-contract=off.
#include <cstdint>
#include <cstring>

#include "common/ps/factor_product/variants.hpp"

#define PSTRAIN_FP_LANES 16
#define PSTRAIN_FP_VECTORS 4

namespace pstrain::factor_product::avx512 {
#include "common/ps/factor_product/kernel.inc"
}  // namespace pstrain::factor_product::avx512

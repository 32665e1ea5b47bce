// The ISA variants of FactorProduct (common/ps/factor_rebuild.hpp), one per
// file of this folder, each compiled for its instruction set with
// -ffp-contract=off (common/CMakeLists.txt): the same floats from every one.
// FactorProduct calls the widest the CPU supports (PSTRAIN_CPU_ISA=generic
// or avx2 picks a narrower one, as for the layers' kernels).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pstrain::factor_product {

// out (rows x cols) = left^T right; left samples x rows, each sample's row
// `ld` floats apart (ld >= rows), right samples x cols.
using Kernel = void (*)(const float* left, int64_t ld, const float* right, int64_t rows,
                        int64_t samples, int64_t cols, float* out);

namespace generic {
void FactorProductKernel(const float* left, int64_t ld, const float* right, int64_t rows,
                         int64_t samples, int64_t cols, float* out);
}
namespace avx2 {
void FactorProductKernel(const float* left, int64_t ld, const float* right, int64_t rows,
                         int64_t samples, int64_t cols, float* out);
}
namespace avx512 {
void FactorProductKernel(const float* left, int64_t ld, const float* right, int64_t rows,
                         int64_t samples, int64_t cols, float* out);
}

struct Variant {
  std::string isa;  // "generic", "avx2", "avx512"
  Kernel kernel;
};

// The variants this CPU can run, narrowest first.
std::vector<Variant> SupportedVariants();
// The one FactorProduct uses (chosen once per process).
const Variant& ChosenVariant();

}  // namespace pstrain::factor_product

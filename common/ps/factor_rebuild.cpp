#include "common/ps/factor_rebuild.hpp"

#include <algorithm>
#include <cstdlib>

#include "common/ps/factor_product/variants.hpp"
#include "common/ps/sufficient_factors.hpp"

namespace pstrain {

void FactorProduct(const float* left, const float* right, int64_t rows, int64_t samples,
                   int64_t cols, float* out) {
  factor_product::ChosenVariant().kernel(left, rows, right, rows, samples, cols, out);
}

namespace factor_product {

std::vector<Variant> SupportedVariants() {
  std::vector<Variant> variants{{"generic", generic::FactorProductKernel}};
#if defined(PSTRAIN_FP_X86)  // the AVX variants are built on x86-64 only
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) variants.push_back({"avx2", avx2::FactorProductKernel});
  if (__builtin_cpu_supports("avx512f")) {
    variants.push_back({"avx512", avx512::FactorProductKernel});
  }
#endif
  return variants;
}

const Variant& ChosenVariant() {
  static const Variant chosen = [] {
    std::vector<Variant> variants = SupportedVariants();
    // PSTRAIN_CPU_ISA (worker/layers/cpu_kernel_isa.hpp) narrows the choice;
    // a value this CPU cannot run leaves the widest (the layers say why).
    if (const char* isa = std::getenv("PSTRAIN_CPU_ISA"); isa != nullptr && *isa != '\0') {
      for (const Variant& v : variants) {
        if (v.isa == isa) return v;
      }
    }
    return variants.back();
  }();
  return chosen;
}

}  // namespace factor_product

void FactorRebuild::Rebuild(const pstrain::Header& h, const float* left, const float* right,
                            const KeyPlacement& placement, std::vector<float*>* chunks) {
  const pstrain::FactorShape& f = h.factors();
  const int64_t samples = f.samples();
  const int64_t cols = f.cols();
  const int64_t width = f.row_end() - f.row_begin();  // L's columns on the wire: its stride
  if (values_.size() < static_cast<size_t>(h.chunks_size())) values_.resize(h.chunks_size());
  chunks->clear();
  jobs_.clear();
  int64_t total = 0;  // rows of every chunk, one after the other
  for (int i = 0; i < h.chunks_size(); ++i) {
    const Chunk& c = placement.chunk(h.chunks(i).id());
    const WeightRows rows = ChunkRows(c, cols);
    std::vector<float>& out = values_[static_cast<size_t>(i)];
    out.resize(static_cast<size_t>(rows.count() * cols));
    // G[rows, :] = L[:, rows]^T R: L's columns [rows.begin, rows.end) read
    // in place (stride `width`).
    jobs_.push_back({left + (rows.begin - f.row_begin()), out.data(), total, rows.count()});
    total += rows.count();
    chunks->push_back(out.data() + (c.offset - rows.begin * cols));
  }
  // Rows [a, b) of all chunks: each row is the same operations whichever
  // range and thread it falls in.
  auto run = [&](int64_t a, int64_t b) {
    for (const Job& job : jobs_) {
      const int64_t lo = std::max(a, job.first) - job.first;
      const int64_t hi = std::min(b, job.first + job.rows) - job.first;
      if (lo >= hi) continue;
      factor_product::ChosenVariant().kernel(job.left + lo, width, right, hi - lo, samples, cols,
                                             job.out + lo * cols);
    }
  };
  if (row_ranges_) {
    row_ranges_(total, cols, run);
  } else {
    run(0, total);
  }
}

}  // namespace pstrain

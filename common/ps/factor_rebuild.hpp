// FactorRebuild: a PUSH that carries sufficient factors (Header.factors,
// common/ps/sufficient_factors.hpp) becomes one dense gradient per listed
// chunk, the values the worker would have sent: chunk = (L^T R)[chunk], a
// small GEMM over the weight rows the chunk touches (partial rows at its
// edges are computed whole and cut). From there on the shard treats the push
// like any other: the same finite check, rank-ordered bsp sum, averaging and
// update rule (server/shard_state_push.cpp), so bsp with factors equals the
// dense path to the rounding of the GEMM's summation order.
// Shared by the shard (server/shard_loop.cpp) and the worker's replica of a
// broadcast weight (common/ps/factor_replica.hpp), so both rebuild a chunk
// with the same product of the same shape: the same floats. The product is
// FactorProduct, a loop with one fixed order of float operations, not BLAS:
// OpenBLAS's result depends on its thread count (its tiling puts some values
// at tile edges, summed otherwise) and on the CPU kernel it picks, which
// differ between a shard and a worker process, and between hosts. One
// caller at a time (its rows may run on the threads of set_row_ranges).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/ps/key_placement.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain {

// out (rows x cols) = left^T right, left samples x rows, right samples x
// cols, row-major: out[r][j] = left[0][r] * right[0][j] + left[1][r] *
// right[1][j] + ... in sample order, each product and sum rounded to float
// (no fused multiply-add: -ffp-contract=off), so every build of it gives the
// same floats. Register-tiled, in the widest of its ISA variants the CPU runs
// (common/ps/factor_product/): generic (SSE2), AVX2 and AVX-512 compute
// each element with the same operations in the same order, so a worker and a
// shard on hosts with different CPUs agree bit for bit.
void FactorProduct(const float* left, const float* right, int64_t rows, int64_t samples,
                   int64_t cols, float* out);

// Calls run(a, b) on consecutive ranges of rows covering [0, rows), each row
// in exactly one, possibly on several threads at once, and returns when all
// have returned; values_per_row says how much work a row is.
using RowRanges = std::function<void(int64_t rows, int64_t values_per_row,
                                     const std::function<void(int64_t a, int64_t b)>& run)>;

class FactorRebuild {
 public:
  // Where the rows of a rebuild run (the shard: its apply threads,
  // server/factor_arrival.hpp); unset: on the caller. Every row is computed
  // by the same operations either way: the same floats for any split.
  void set_row_ranges(RowRanges row_ranges) { row_ranges_ = std::move(row_ranges); }

  // Writes into `chunks` one pointer per h.chunks(), to its values (valid
  // until the next Rebuild; the caller may overwrite them in place).
  // left: h.factors().samples x (row_end - row_begin); right: samples x cols.
  // REQUIRES: the message passed transport::Validate with `placement`.
  void Rebuild(const pstrain::Header& h, const float* left, const float* right,
               const KeyPlacement& placement, std::vector<float*>* chunks);

 private:
  struct Job {
    const float* left;  // L's column of the chunk's first row (row stride: L's width)
    float* out;         // its whole rows
    int64_t first;      // its first row among all jobs' rows
    int64_t rows;
  };
  std::vector<std::vector<float>> values_;  // per listed chunk: its whole rows
  std::vector<Job> jobs_;
  RowRanges row_ranges_;
};

}  // namespace pstrain

// RankOrderedSum: the BSP sum of one step's W gradients per chunk, always
// g_0 + g_1 + ... + g_{W-1} in rank order whatever order they arrive in, so
// reruns are bit-identical.
//
// Gradients arriving in rank order are added at once; one arriving early is
// copied aside (decoded) until its turn. Buffers are kept across steps
// (Reset), so a steady-state step allocates nothing. A compressed gradient is
// decoded block by block as it is added (server/encoded_gradient.hpp), and
// with a pool (server/apply_threads.hpp) each chunk's values are split among
// its threads: every value is the same sum in the same order either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "server/apply_threads.hpp"
#include "server/encoded_gradient.hpp"

namespace pstrain::server {

class RankOrderedSum {
 public:
  // `lengths`: values of each chunk (local index order); `threads` (not
  // owned, may be null: one thread) splits the passes over a chunk.
  RankOrderedSum(int num_workers, const std::vector<int64_t>& lengths,
                 ApplyThreads* threads = nullptr);

  // Adds worker `rank`'s gradient of chunk `c` (lengths[c] values, copied or
  // added before returning). Returns true when this completed the chunk.
  // REQUIRES: 0 <= rank < num_workers; rank not yet added to c since Reset().
  bool Add(int c, int rank, const float* grad);
  // As Add, for a gradient as it travelled. REQUIRES: grad.n == lengths[c].
  bool Add(int c, int rank, const EncodedGradient& grad);
  bool complete(int c) const { return chunks_[static_cast<size_t>(c)].next == num_workers_; }
  // The sum of chunk c. REQUIRES: complete(c). The caller may overwrite it
  // (until Reset()).
  float* sum(int c) { return chunks_[static_cast<size_t>(c)].acc.data(); }
  const float* sum(int c) const { return chunks_[static_cast<size_t>(c)].acc.data(); }
  int64_t length(int c) const {
    return static_cast<int64_t>(chunks_[static_cast<size_t>(c)].acc.size());
  }
  int num_chunks() const { return static_cast<int>(chunks_.size()); }

  // Forgets every gradient added (the next step starts).
  void Reset();

 private:
  struct PerChunk {
    std::vector<float> acc;
    int next = 0;                           // ranks < next are in acc
    std::vector<std::vector<float>> early;  // [rank]: arrived before its turn
    std::vector<char> has_early;
  };
  void Accumulate(PerChunk& chunk, const EncodedGradient& grad);
  void ForRanges(size_t n, const std::function<void(int, size_t, size_t)>& fn);

  int num_workers_;
  std::vector<PerChunk> chunks_;
  ApplyThreads* threads_;
  std::vector<std::vector<float>> blocks_;  // decode blocks, one per part of the pool
};

}  // namespace pstrain::server

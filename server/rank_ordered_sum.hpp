// RankOrderedSum: the BSP sum of one step's W gradients per chunk, always
// g_0 + g_1 + ... + g_{W-1} in rank order whatever order they arrive in, so
// reruns are bit-identical.
//
// Gradients arriving in rank order are added at once; one arriving early is
// copied aside until its turn. Buffers are kept across steps (Reset), so a
// steady-state step allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pstrain::server {

class RankOrderedSum {
 public:
  // `lengths`: values of each chunk (local index order).
  RankOrderedSum(int num_workers, const std::vector<int64_t>& lengths);

  // Adds worker `rank`'s gradient of chunk `c` (lengths[c] values, copied or
  // added before returning). Returns true when this completed the chunk.
  // REQUIRES: 0 <= rank < num_workers; rank not yet added to c since Reset().
  bool Add(int c, int rank, const float* grad);
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
  void Accumulate(PerChunk& chunk, const float* grad);

  int num_workers_;
  std::vector<PerChunk> chunks_;
};

}  // namespace pstrain::server

#include "server/rank_ordered_sum.hpp"

#include <algorithm>
#include <cstring>

#include "common/status.hpp"

namespace pstrain::server {

RankOrderedSum::RankOrderedSum(int num_workers, const std::vector<int64_t>& lengths)
    : num_workers_(num_workers), chunks_(lengths.size()) {
  for (size_t c = 0; c < lengths.size(); ++c) {
    chunks_[c].acc.assign(static_cast<size_t>(lengths[c]), 0.f);
    chunks_[c].early.resize(static_cast<size_t>(num_workers));
    chunks_[c].has_early.assign(static_cast<size_t>(num_workers), 0);
  }
}

void RankOrderedSum::Accumulate(PerChunk& chunk, const float* grad) {
  float* acc = chunk.acc.data();
  const size_t n = chunk.acc.size();
  if (chunk.next == 0) {
    std::memcpy(acc, grad, n * sizeof(float));
  } else {
    for (size_t i = 0; i < n; ++i) acc[i] += grad[i];
  }
  ++chunk.next;
}

bool RankOrderedSum::Add(int c, int rank, const float* grad) {
  PerChunk& chunk = chunks_[static_cast<size_t>(c)];
  const size_t r = static_cast<size_t>(rank);
  PSTRAIN_CHECK(rank >= chunk.next && !chunk.has_early[r]);
  if (rank != chunk.next) {
    chunk.early[r].assign(grad, grad + chunk.acc.size());
    chunk.has_early[r] = 1;
    return false;
  }
  Accumulate(chunk, grad);
  while (chunk.next < num_workers_ && chunk.has_early[static_cast<size_t>(chunk.next)]) {
    const size_t e = static_cast<size_t>(chunk.next);
    chunk.has_early[e] = 0;
    Accumulate(chunk, chunk.early[e].data());
  }
  return chunk.next == num_workers_;
}

void RankOrderedSum::Reset() {
  for (PerChunk& chunk : chunks_) {
    chunk.next = 0;
    std::fill(chunk.has_early.begin(), chunk.has_early.end(), 0);
  }
}

}  // namespace pstrain::server

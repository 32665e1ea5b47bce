#include "server/rank_ordered_sum.hpp"

#include <algorithm>
#include <cstring>

#include "common/status.hpp"

namespace pstrain::server {

RankOrderedSum::RankOrderedSum(int num_workers, const std::vector<int64_t>& lengths,
                               ApplyThreads* threads)
    : num_workers_(num_workers), chunks_(lengths.size()), threads_(threads) {
  for (size_t c = 0; c < lengths.size(); ++c) {
    chunks_[c].acc.assign(static_cast<size_t>(lengths[c]), 0.f);
    chunks_[c].early.resize(static_cast<size_t>(num_workers));
    chunks_[c].has_early.assign(static_cast<size_t>(num_workers), 0);
  }
  blocks_.resize(threads != nullptr ? static_cast<size_t>(threads->threads()) : 1,
                 std::vector<float>(kDecodeBlock));
}

void RankOrderedSum::ForRanges(size_t n, const std::function<void(int, size_t, size_t)>& fn) {
  if (threads_ == nullptr) return fn(0, 0, n);
  threads_->ForRanges(n, fn);
}

void RankOrderedSum::Accumulate(PerChunk& chunk, const EncodedGradient& grad) {
  float* acc = chunk.acc.data();
  const bool first = chunk.next == 0;
  ForRanges(chunk.acc.size(), [&](int part, size_t begin, size_t end) {
    if (first) return DecodeRange(grad, begin, end, acc + begin);
    if (grad.is_float32()) {
      const float* g = grad.floats();
      for (size_t i = begin; i < end; ++i) acc[i] += g[i];
      return;
    }
    float* block = blocks_[static_cast<size_t>(part)].data();
    for (size_t b = begin; b < end; b += kDecodeBlock) {
      const size_t e = std::min(end, b + kDecodeBlock);
      DecodeRange(grad, b, e, block);
      for (size_t i = b; i < e; ++i) acc[i] += block[i - b];
    }
  });
  ++chunk.next;
}

bool RankOrderedSum::Add(int c, int rank, const float* grad) {
  const size_t n = chunks_[static_cast<size_t>(c)].acc.size();
  return Add(c, rank, EncodedGradient{pstrain::FLOAT32, grad, n * sizeof(float), n});
}

bool RankOrderedSum::Add(int c, int rank, const EncodedGradient& grad) {
  PerChunk& chunk = chunks_[static_cast<size_t>(c)];
  const size_t r = static_cast<size_t>(rank);
  PSTRAIN_CHECK(rank >= chunk.next && !chunk.has_early[r]);
  PSTRAIN_CHECK(grad.n == chunk.acc.size());
  if (rank != chunk.next) {
    chunk.early[r].resize(chunk.acc.size());
    DecodeRange(grad, 0, grad.n, chunk.early[r].data());
    chunk.has_early[r] = 1;
    return false;
  }
  Accumulate(chunk, grad);
  while (chunk.next < num_workers_ && chunk.has_early[static_cast<size_t>(chunk.next)]) {
    const size_t e = static_cast<size_t>(chunk.next);
    chunk.has_early[e] = 0;
    const std::vector<float>& early = chunk.early[e];
    Accumulate(chunk, EncodedGradient{pstrain::FLOAT32, early.data(),
                                      early.size() * sizeof(float), early.size()});
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

// ShardState: the check that keeps NaN and infinity out of the weights. A
// PUSH or INIT_PUSH is scanned whole before any of it is used, so a refused
// message changes nothing (docs/security.md, "Non-finite values").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "server/shard_state.hpp"

namespace pstrain::server {
namespace {

// True when one of values[0, n) is NaN or infinite (all exponent bits set).
// Branch-free, so the compiler vectorises it: this scan reads every byte a
// shard receives, at the cost of one extra pass over memory.
bool AnyNonFinite(const float* values, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + i, sizeof(bits));
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad != 0;
}

// Index of the first NaN or infinity among `count` values, or -1.
int64_t FirstNonFinite(const float* values, uint64_t count) {
  constexpr uint64_t kBlock = 4096;
  for (uint64_t start = 0; start < count; start += kBlock) {
    const uint64_t n = std::min(kBlock, count - start);
    if (!AnyNonFinite(values + start, n)) continue;
    for (uint64_t i = start; i < start + n; ++i) {
      if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
    }
  }
  return -1;
}

}  // namespace

bool ShardState::AllFinite(const Incoming& m, Out& out) {
  const pstrain::Header& h = m.header;
  for (int i = 0; i < h.chunks_size(); ++i) {
    float bad = 0;
    int64_t at = -1;
    if (h.dtype() == pstrain::FLOAT32) {
      const float* values = m.payloads[static_cast<size_t>(i)];
      at = FirstNonFinite(values, h.chunks(i).length());
      if (at >= 0) bad = values[at];
    } else {  // a compressed push, checked as it travelled
      at = FirstNonFinite(PushChunk(m, i), &bad);
    }
    if (at < 0) continue;
    const uint32_t id = h.chunks(i).id();
    std::string where = "chunk " + std::to_string(id);
    if (const KeyPlacement* table = placement(); table != nullptr && id < table->chunks().size()) {
      const Chunk& chunk = table->chunk(id);
      where += " (parameter " + std::to_string(chunk.param);
      if (static_cast<size_t>(chunk.param) < core_->layout.params.size()) {
        where += " '" + core_->layout.params[static_cast<size_t>(chunk.param)].name() + "'";
      }
      where += ", value " + std::to_string(chunk.offset + at) + ")";
    } else {
      where += " (value " + std::to_string(at) + ")";
    }
    char value[32];
    std::snprintf(value, sizeof(value), "%g", static_cast<double>(bad));
    const std::string what =
        pstrain::MessageType_Name(h.type()) + " from worker " + std::to_string(h.sender()) +
        (h.has_clock() ? " for iteration " + std::to_string(h.clock()) : std::string()) + ": " +
        where + " holds " + value;
    ++nonfinite_rejected_;
    nonfinite_last_ = what;
    const bool stop = core_->config.nonfinite == NonFinitePolicy::kStop;
    LogDrop(what + (stop ? "; refused, the job stops (security.nonfinite: stop)"
                         : "; refused, nothing applied (security.nonfinite: drop)"));
    Outgoing reply;
    reply.peer = m.peer;
    reply.header = transport::ErrorHeader(origin(), h, what + ": refused");
    out.push_back(std::move(reply));
    if (stop) failure_ = Status::Diverged(what + "; the job stops (security.nonfinite: stop)");
    return false;
  }
  return true;
}

}  // namespace pstrain::server

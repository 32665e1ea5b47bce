// ShardServer: the check that keeps NaN and infinity out of the weights. A
// PUSH or INIT_PUSH is scanned whole before any of it is used, so a refused
// message changes nothing (docs/security.md, "Non-finite values").
#include <cmath>
#include <cstdio>

#include "server/shard_server.hpp"

namespace pstrain::server {
namespace {

// Index of the first NaN or infinity among `count` values, or -1.
int64_t FirstNonFinite(const float* values, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace

bool ShardServer::AllFinite(const Incoming& m, Out& out) {
  const pstrain::Header& h = m.header;
  for (int i = 0; i < h.chunks_size(); ++i) {
    const float* values = m.payloads[static_cast<size_t>(i)];
    const int64_t at = FirstNonFinite(values, h.chunks(i).length());
    if (at < 0) continue;
    const uint32_t id = h.chunks(i).id();
    std::string where = "chunk " + std::to_string(id);
    if (const KeyPlacement* table = placement(); table != nullptr && id < table->chunks().size()) {
      const Chunk& chunk = table->chunk(id);
      where += " (parameter " + std::to_string(chunk.param);
      if (static_cast<size_t>(chunk.param) < layout_.params.size()) {
        where += " '" + layout_.params[static_cast<size_t>(chunk.param)].name() + "'";
      }
      where += ", value " + std::to_string(chunk.offset + at) + ")";
    } else {
      where += " (value " + std::to_string(at) + ")";
    }
    char value[32];
    std::snprintf(value, sizeof(value), "%g", static_cast<double>(values[at]));
    const std::string what =
        pstrain::MessageType_Name(h.type()) + " from worker " + std::to_string(h.sender()) +
        (h.has_clock() ? " for iteration " + std::to_string(h.clock()) : std::string()) + ": " +
        where + " holds " + value;
    ++nonfinite_rejected_;
    nonfinite_last_ = what;
    const bool stop = config_.nonfinite == NonFinitePolicy::kStop;
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

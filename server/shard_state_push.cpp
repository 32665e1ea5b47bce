// ShardState: PUSH (clock checks and duplicates; the policy does the rest)
// and the checks of the gradient-norm messages before the policy takes them.
#include <algorithm>

#include "server/shard_state.hpp"

namespace pstrain::server {

void ShardState::OnPush(const Incoming& m, Out& out) {
  const pstrain::Header& h = m.header;
  if (!initialized()) {
    Reject(m, "push before the init push", out);
    return;
  }
  ShardCore& core = *core_;
  const ChunkStore& store = core.store();
  const int w = h.sender();
  const int64_t t = h.clock();
  const int64_t clock = core.clocks.clock(w);
  if (t > clock) {
    Reject(m,
           "pushed iteration " + std::to_string(t) + " but the worker's clock is " +
               std::to_string(clock),
           out);
    return;
  }
  if (t < clock) {  // a resend of an iteration already complete here
    duplicates_dropped_ += h.chunks_size();
    Log("worker " + std::to_string(w) + "'s push of iteration " + std::to_string(t) +
        " dropped: that iteration is complete (clock " + std::to_string(clock) + ")");
    out.push_back(Reply(m, pstrain::PUSH_ACK));
    return;
  }
  if (const std::string why = policy_->RefusePush(h); !why.empty()) {
    Reject(m, why, out);
    return;
  }
  if (h.has_factors() && h.factors().relay() && !KeepRelay(m, out)) return;
  WorkerState& worker = core.workers[static_cast<size_t>(w)];
  const float scale = policy_->PushScale(h);
  for (int i = 0; i < h.chunks_size(); ++i) {
    const uint32_t id = h.chunks(i).id();
    const int local = store.LocalIndex(id);
    if (worker.arrived[static_cast<size_t>(local)]) {
      ++duplicates_dropped_;
      Log("worker " + std::to_string(w) + "'s chunk " + std::to_string(id) + " of iteration " +
          std::to_string(t) + " dropped: received before");
      continue;
    }
    worker.arrived[static_cast<size_t>(local)] = 1;
    ++worker.arrived_count;
    ChunkGradient g{w, t, id, local, PushChunk(m, i), m.payloads[static_cast<size_t>(i)], scale,
                    &decoded_};
    policy_->OnGradient(g);
  }
  out.push_back(Reply(m, pstrain::PUSH_ACK));
  if (worker.arrived_count == store.num_chunks()) {
    std::fill(worker.arrived.begin(), worker.arrived.end(), 0);
    worker.arrived_count = 0;
    core.clocks.Advance(w);
    policy_->WorkerCompleted(w);
  }
  policy_->AfterPush(out);
}

EncodedGradient PushChunk(const Incoming& m, int i) {
  const size_t k = static_cast<size_t>(i);
  const uint64_t n = m.header.chunks(i).length();
  return EncodedGradient{m.header.dtype(), m.payloads[k],
                         m.payload_bytes.empty() ? n * sizeof(float) : m.payload_bytes[k], n};
}

void ShardState::OnNormPartial(const Incoming& m, Out& out) {
  const pstrain::Header& h = m.header;
  if (core_->config.shard != 0 || h.sender() == 0) {
    Reject(m, "NORM_PARTIAL goes from servers 1.. to server 0", out);
    return;
  }
  if (!ExpectsNorms()) {
    Reject(m, "no gradient norms are exchanged (bsp with clip_gradients only, after init)", out);
    return;
  }
  const int64_t version = core_->version;
  if (h.clock() > version + 1) {
    Reject(m,
           "NORM_PARTIAL for step " + std::to_string(h.clock()) + " while at step " +
               std::to_string(version),
           out);
    return;
  }
  if (h.clock() < version) {
    Log("NORM_PARTIAL from server " + std::to_string(h.sender()) + " for step " +
        std::to_string(h.clock()) + " dropped: that step is applied");
    return;
  }
  policy_->OnNormPartial(h.sender(), h.clock(), h.sum_squares(), out);
}

void ShardState::OnNormTotal(const Incoming& m, Out& out) {
  const pstrain::Header& h = m.header;
  if (core_->config.shard == 0 || h.sender() != 0) {
    Reject(m, "NORM_TOTAL goes from server 0 to the others", out);
    return;
  }
  if (!ExpectsNorms()) {
    Reject(m, "no gradient norms are exchanged (bsp with clip_gradients only, after init)", out);
    return;
  }
  if (h.clock() < core_->version) {
    Log("NORM_TOTAL for step " + std::to_string(h.clock()) + " dropped: that step is applied");
    return;
  }
  policy_->OnNormTotal(h.clock(), h.sum_squares());
}

}  // namespace pstrain::server

// ShardServer: PULL (consistency bound, checkpoint barrier) and wait warnings.
#include <algorithm>
#include <cstdio>

#include "server/shard_server.hpp"

namespace pstrain::server {
namespace {

std::string WorkerList(const ClockTable& clocks, const std::vector<int>& workers) {
  std::string text;
  for (int w : workers) {
    if (!text.empty()) text += ", ";
    text += "worker " + std::to_string(w) + " (clock " + std::to_string(clocks.clock(w)) + ")";
  }
  return text;
}

}  // namespace

void ShardServer::OnPull(const Incoming& m, TimePoint now) {
  const pstrain::Header& h = m.header;
  // Answered (possibly at once) by ServeReadyPulls at the end of Handle.
  deferred_.push_back(DeferredPull{m.peer, h.sender(), h.clock(), now, now, {}, 0,
                                   h.has_after_push() ? h.after_push() : -1});
}

bool ShardServer::IsCheckpointIteration(int64_t t) const {
  if (config_.final_iter > 0 && t == config_.final_iter) return true;
  return config_.snapshot_interval > 0 && t > 0 && t % config_.snapshot_interval == 0;
}

bool ShardServer::PullReady(const DeferredPull& pull) const {
  const int64_t t = pull.clock;
  const int worker = pull.worker;
  if (!initialized()) return false;
  if (pull.after_push >= 0 && clocks_.clock(worker) <= pull.after_push) return false;
  if (IsCheckpointIteration(t) && t > checkpoint_cut_) {
    // One global cut: every worker has finished t iterations and none more.
    if (!clocks_.NotAt(t).empty()) return false;
    return config_.mode != ConsistencyMode::kBsp || version_ >= t;
  }
  switch (config_.mode) {
    case ConsistencyMode::kBsp:
      // With backups the step may be applied before this worker pushed: its
      // weights must not change under its own backward.
      return version_ >= t && (!backup_step_ || clocks_.clock(worker) >= t);
    case ConsistencyMode::kSsp:
      return clocks_.min() >= t - config_.staleness;
    case ConsistencyMode::kAsp:
      return true;
  }
  return false;
}

bool ShardServer::PullsByChunk(const DeferredPull& pull) const {
  if (!initialized() || IsCheckpointIteration(pull.clock)) return false;
  switch (config_.mode) {
    case ConsistencyMode::kBsp:
      return true;
    case ConsistencyMode::kSsp:
      return pull.after_push >= 0 && clocks_.min() >= pull.clock - config_.staleness;
    case ConsistencyMode::kAsp:
      return pull.after_push >= 0;
  }
  return false;
}

bool ShardServer::ChunkReady(int local, const DeferredPull& pull) const {
  const int64_t t = pull.clock;
  const int worker = pull.worker;
  if (config_.mode != ConsistencyMode::kBsp) {
    // The worker's own push after_push of this chunk is applied (on arrival).
    const int64_t clock = clocks_.clock(worker);
    return clock > pull.after_push ||
           (clock == pull.after_push &&
            workers_[static_cast<size_t>(worker)].arrived[static_cast<size_t>(local)]);
  }
  if (backup_step_ && clocks_.clock(worker) < t &&
      !workers_[static_cast<size_t>(worker)].arrived[static_cast<size_t>(local)]) {
    return false;  // this worker still has to push the chunk (its backward reads it)
  }
  return std::max(version_, chunk_steps_[static_cast<size_t>(local)]) >= t;
}

void ShardServer::ServeReadyPulls(Out& out) {
  for (size_t i = 0; i < deferred_.size();) {
    DeferredPull& pull = deferred_[i];
    if (PullReady(pull)) {
      if (IsCheckpointIteration(pull.clock) && pull.clock > checkpoint_cut_) {
        CutCheckpoint(pull.clock);
      }
      const bool partly_sent = pull.sent_count > 0;
      Outgoing rest = PullReply(pull, [](int) { return true; });
      if (rest.header.chunks_size() > 0 || !partly_sent) out.push_back(std::move(rest));
      deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    if (PullsByChunk(pull)) {
      auto ready = [this, &pull](int local) {
        const size_t c = static_cast<size_t>(local);
        return (c >= pull.sent.size() || !pull.sent[c]) && ChunkReady(local, pull);
      };
      bool any = false;
      for (int c = 0; c < layout_.store->num_chunks() && !any; ++c) any = ready(c);
      if (any) out.push_back(PullReply(pull, ready));
    }
    ++i;
  }
}

void ShardServer::CutCheckpoint(int64_t t) {
  const std::string path = config_.snapshot_prefix + "_iter_" + std::to_string(t) + ".shard" +
                           std::to_string(config_.shard) + ".state";
  checkpoint_cut_ = t;
  if (Status s = WriteCheckpoint(path); !s.ok()) {
    checkpoint_path_.clear();
    Log("checkpoint at iteration " + std::to_string(t) + " FAILED: " + s.message());
    return;
  }
  checkpoint_path_ = path;
  Log("checkpoint at iteration " + std::to_string(t) + " written to " + path);
}

Outgoing ShardServer::PullReply(DeferredPull& pull, const std::function<bool(int)>& ready) {
  ChunkStore& store = *layout_.store;
  Outgoing o;
  o.peer = pull.peer;
  o.header = transport::NewHeader(origin(), pstrain::PULL_REPLY);
  o.header.set_clock(pull.clock);
  o.header.set_version(version_);
  o.header.set_reply_chunks_total(static_cast<uint32_t>(store.num_chunks()));
  if (IsCheckpointIteration(pull.clock) && pull.clock == checkpoint_cut_) {
    o.header.set_text(checkpoint_path_);
  }
  pull.sent.resize(static_cast<size_t>(store.num_chunks()), 0);
  for (int c = 0; c < store.num_chunks(); ++c) {
    if (pull.sent[static_cast<size_t>(c)] || !ready(c)) continue;
    pull.sent[static_cast<size_t>(c)] = 1;
    ++pull.sent_count;
    const uint32_t id = store.chunk_ids()[static_cast<size_t>(c)];
    transport::AddChunk(o.header, id, static_cast<uint64_t>(store.length(id)));
    o.payloads.push_back(store.Snapshot(id));
    if (!served_weights_.empty()) {
      served_weights_[static_cast<size_t>(pull.worker)][static_cast<size_t>(c)] = o.payloads.back();
    }
  }
  if (pull.sent_count == store.num_chunks()) {
    workers_[static_cast<size_t>(pull.worker)].served_version = version_;
  }
  return o;
}

std::string ShardServer::WaitReason(const DeferredPull& pull) const {
  const int64_t t = pull.clock;
  if (!initialized()) return "the init push from worker 0";
  if (pull.after_push >= 0 && clocks_.clock(pull.worker) <= pull.after_push) {
    return "its own push of iteration " + std::to_string(pull.after_push) + " (clock " +
           std::to_string(clocks_.clock(pull.worker)) + ")";
  }
  if (IsCheckpointIteration(t) && t > checkpoint_cut_) {
    const std::vector<int> off = clocks_.NotAt(t);
    if (!off.empty()) {
      return "the checkpoint cut at iteration " + std::to_string(t) + ": " +
             WorkerList(clocks_, off);
    }
  }
  const int64_t bound = config_.mode == ConsistencyMode::kSsp ? t - config_.staleness : t;
  const std::vector<int> behind = clocks_.Below(bound);
  if (!behind.empty()) return WorkerList(clocks_, behind);
  std::string step = "step " + std::to_string(t - 1);
  if (config_.hyper.clip_gradients >= 0) {
    step += config_.shard == 0 ? " (gradient norms of the other servers)"
                               : " (the gradient norm total from server 0)";
  }
  return step;
}

std::vector<Outgoing> ShardServer::Tick(TimePoint now) {
  const auto warn = std::chrono::milliseconds(config_.wait_warn_ms);
  for (DeferredPull& pull : deferred_) {
    if (now - pull.since < warn || now - pull.last_warning < warn) continue;
    pull.last_warning = now;
    const double waited = std::chrono::duration<double>(now - pull.since).count();
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.1f", waited);
    Log("worker " + std::to_string(pull.worker) + "'s pull for iteration " +
        std::to_string(pull.clock) + " has waited " + seconds + " s for " + WaitReason(pull));
  }
  return {};
}

}  // namespace pstrain::server

// ShardState: PULL (consistency bound, checkpoint barrier) and wait warnings.
#include <algorithm>
#include <cstdio>

#include "server/shard_state.hpp"

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

void ShardState::OnPull(const Incoming& m, TimePoint now, Out& out) {
  const pstrain::Header& h = m.header;
  if (h.role() == pstrain::CONTROL) {
    OnControlPull(m, out);
    return;
  }
  if (!CheckBroadcastPull(m, out)) return;
  // Answered (possibly at once) by ServeReadyPulls at the end of Handle.
  deferred_.push_back(DeferredPull{m.peer, h.sender(), h.clock(), now, now, {}, 0,
                                   h.has_after_push() ? h.after_push() : -1,
                                   {h.broadcast().begin(), h.broadcast().end()},
                                   {h.history_params().begin(), h.history_params().end()},
                                   {h.rights_ahead().begin(), h.rights_ahead().end()}});
  // R pushed once: the R's held here go ahead of step clock - 1 (a pull for
  // clock 0 has no step before it: nothing to send ahead).
  if (!h.rights_ahead().empty() && h.clock() >= 1) {
    rights_wanted_.resize(static_cast<size_t>(core_->config.num_workers));
    rights_wanted_[static_cast<size_t>(h.sender())] =
        RightsWanted{m.peer, h.clock() - 1, {h.rights_ahead().begin(), h.rights_ahead().end()}};
    SendRightsAhead(out);
  }
}

void ShardState::OnControlPull(const Incoming& m, Out& out) {
  if (!initialized()) {
    Reject(m, "no weights yet (the init push from worker 0 has not arrived)", out);
    return;
  }
  ChunkStore& store = *core_->layout.store;
  Outgoing o;
  o.peer = m.peer;
  o.header = transport::NewHeader(origin(), pstrain::PULL_REPLY);
  o.header.set_clock(m.header.clock());
  o.header.set_version(core_->version);
  o.header.set_reply_chunks_total(static_cast<uint32_t>(store.num_chunks()));
  for (const uint32_t id : store.chunk_ids()) {
    transport::AddChunk(o.header, id, static_cast<uint64_t>(store.length(id)));
    o.payloads.push_back(store.Snapshot(id));
  }
  out.push_back(std::move(o));
}

bool ShardState::IsCheckpointIteration(int64_t t) const {
  if (core_->config.final_iter > 0 && t == core_->config.final_iter) return true;
  if (requested_checkpoints_.contains(t)) return true;
  return core_->config.snapshot_interval > 0 && t > 0 && t % core_->config.snapshot_interval == 0;
}

bool ShardState::PullReady(const DeferredPull& pull) const {
  const int64_t t = pull.clock;
  if (!initialized()) return false;
  const ShardCore& core = *core_;
  if (pull.after_push >= 0 && core.clocks.clock(pull.worker) <= pull.after_push) return false;
  if (IsCheckpointIteration(t) && t > checkpoint_cut_) {
    // One global cut: every worker has finished t iterations and none more.
    if (!core.clocks.NotAt(t).empty()) return false;
    return policy_->StepApplied(t);
  }
  return policy_->PullReady(pull);
}

bool ShardState::PullsByChunk(const DeferredPull& pull) const {
  if (!initialized() || IsCheckpointIteration(pull.clock)) return false;
  return policy_->PullsByChunk(pull);
}

void ShardState::ServeReadyPulls(Out& out) {
  pull_encoding_.Clear();  // the weights may have changed since the last call
  // A reply, or an ERROR when the pull cannot be encoded (the pull is then over).
  auto answer = [&](DeferredPull& pull, const std::function<bool(int)>& ready) {
    Result<Outgoing> reply = PullReply(pull, ready);
    if (reply.ok()) {
      out.push_back(std::move(reply).value());
      return true;
    }
    const std::string why = reply.status().message();
    LogDrop("refused worker " + std::to_string(pull.worker) + "'s pull for iteration " +
            std::to_string(pull.clock) + ": " + why);
    Outgoing error;
    error.peer = pull.peer;
    error.header = transport::ErrorHeader(origin(), transport::PullHeader({}, pull.clock), why);
    out.push_back(std::move(error));
    return false;
  };
  for (size_t i = 0; i < deferred_.size();) {
    DeferredPull& pull = deferred_[i];
    if (PullReady(pull)) {
      if (IsCheckpointIteration(pull.clock) && pull.clock > checkpoint_cut_) {
        CutCheckpoint(pull.clock);
      }
      const bool partly_sent = pull.sent_count > 0;
      const size_t before = out.size();
      if (answer(pull, [](int) { return true; }) && partly_sent && out.back().payloads.empty()) {
        out.resize(before);  // nothing left to send
      }
      deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    if (PullsByChunk(pull)) {
      auto ready = [this, &pull](int local) {
        const size_t c = static_cast<size_t>(local);
        return (c >= pull.sent.size() || !pull.sent[c]) && policy_->ChunkReady(local, pull);
      };
      bool any = false;
      for (int c = 0; c < core_->layout.store->num_chunks() && !any; ++c) any = ready(c);
      if (any && !answer(pull, ready)) {
        deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
    }
    ++i;
  }
  pull_encoding_.Clear();  // the next push may change the weights in place
}

void ShardState::CutCheckpoint(int64_t t) {
  const std::string path = core_->config.snapshot_prefix + "_iter_" + std::to_string(t) + ".shard" +
                           std::to_string(core_->config.shard) + ".state";
  checkpoint_cut_ = t;
  if (Status s = WriteCheckpoint(path); !s.ok()) {
    checkpoint_path_.clear();
    Log("checkpoint at iteration " + std::to_string(t) + " FAILED: " + s.message());
    return;
  }
  checkpoint_path_ = path;
  Log("checkpoint at iteration " + std::to_string(t) + " written to " + path);
}

Result<Outgoing> ShardState::PullReply(DeferredPull& pull, const std::function<bool(int)>& ready) {
  ChunkStore& store = *core_->layout.store;
  const pstrain::DataType dtype = core_->workers[static_cast<size_t>(pull.worker)].pull_dtype;
  Outgoing o;
  o.peer = pull.peer;
  o.header = transport::NewHeader(origin(), pstrain::PULL_REPLY);
  o.header.set_clock(pull.clock);
  o.header.set_version(core_->version);
  o.header.set_reply_chunks_total(static_cast<uint32_t>(store.num_chunks()));
  if (IsCheckpointIteration(pull.clock) && pull.clock == checkpoint_cut_) {
    o.header.set_text(checkpoint_path_);
  }
  if (dtype != pstrain::FLOAT32) o.header.set_dtype(dtype);
  pull.sent.resize(static_cast<size_t>(store.num_chunks()), 0);
  std::vector<int> sent;
  std::vector<int> relayed;  // broadcast chunks: answered by their factors
  for (int c = 0; c < store.num_chunks(); ++c) {
    if (pull.sent[static_cast<size_t>(c)] || !ready(c)) continue;
    const uint32_t id = store.chunk_ids()[static_cast<size_t>(c)];
    if (InBroadcast(pull, id)) {
      if (!WeightReady(id, ready)) continue;
      relayed.push_back(c);
      // Also in history_params: the weights and history go too (the
      // worker checks its replica against them).
      if (!InHistory(pull, id)) continue;
    }
    // The weights of iteration pull.clock: a chunk whose step pull.clock
    // landed ahead of the rest of the step (a restarted worker's pull) goes
    // as it was before that step (ShardCore::StepStart).
    const ShardCore::StepStart* before = core_->StepStartOf(c, pull.clock);
    std::shared_ptr<const std::vector<float>> weights =
        before != nullptr ? before->weights : store.Snapshot(id);
    transport::AddChunk(o.header, id, static_cast<uint64_t>(store.length(id)));
    if (dtype == pstrain::FLOAT32) {
      o.payloads.push_back(weights);
    } else {
      PullEncoding once;  // not the step's shared encodings: these are other values
      PSTRAIN_ASSIGN_OR_RETURN(
          auto encoded,
          (before != nullptr ? once : pull_encoding_).Encode(id, dtype, *weights, core_->layout));
      o.payloads.push_back(std::move(encoded));
    }
    // DC-ASGD compensates against the float32 weights served (16-bit pulls:
    // the worker computed on these rounded, within half a 16-bit step).
    policy_->Served(pull.worker, c, weights);
    sent.push_back(c);
  }
  if (!pull.broadcast.empty() || !pull.history_params.empty()) {
    PSTRAIN_RETURN_IF_ERROR(AddHistoryAndRelay(pull, relayed, sent, o));
  }
  for (int c : relayed) {
    if (std::find(sent.begin(), sent.end(), c) == sent.end()) sent.push_back(c);
  }
  for (int c : sent) pull.sent[static_cast<size_t>(c)] = 1;
  pull.sent_count += static_cast<int>(sent.size());
  if (pull.sent_count == store.num_chunks()) {
    core_->workers[static_cast<size_t>(pull.worker)].served_version = core_->version;
  }
  return o;
}

std::string ShardState::WaitReason(const DeferredPull& pull) const {
  const int64_t t = pull.clock;
  if (!initialized()) return "the init push from worker 0";
  if (pull.after_push >= 0 && core_->clocks.clock(pull.worker) <= pull.after_push) {
    return "its own push of iteration " + std::to_string(pull.after_push) + " (clock " +
           std::to_string(core_->clocks.clock(pull.worker)) + ")";
  }
  if (IsCheckpointIteration(t) && t > checkpoint_cut_) {
    const std::vector<int> off = core_->clocks.NotAt(t);
    if (!off.empty()) {
      return "the checkpoint cut at iteration " + std::to_string(t) + ": " +
             WorkerList(core_->clocks, off);
    }
  }
  if (core_->config.step_gate && t >= core_->gate) {
    return "the step gate (at " + std::to_string(core_->gate) + ", raised by GATE)";
  }
  const int64_t bound = policy_->WaitBound(pull);
  const std::vector<int> behind = core_->clocks.Below(bound);
  if (!behind.empty()) return WorkerList(core_->clocks, behind);
  std::string step = "step " + std::to_string(t - 1);
  if (core_->config.hyper.clip_gradients >= 0) {
    step += core_->config.shard == 0 ? " (gradient norms of the other servers)"
                                     : " (the gradient norm total from server 0)";
  }
  return step;
}

std::vector<Outgoing> ShardState::Tick(TimePoint now) {
  const auto warn = std::chrono::milliseconds(core_->config.wait_warn_ms);
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

// ShardState: construction, dispatch, HELLO, INIT_PUSH, STATS, checkpoints.
#include "server/shard_state.hpp"

#include <algorithm>

namespace pstrain::server {
namespace {

std::string Sender(const pstrain::Header& h) {
  const char* role = h.role() == pstrain::WORKER   ? "worker "
                     : h.role() == pstrain::SERVER ? "server "
                                                   : "control ";
  return role + std::to_string(h.sender());
}

}  // namespace

ShardState::ShardState(ShardConfig config) {
  PSTRAIN_CHECK_MSG(ValidateShardConfig(config).ok(), ValidateShardConfig(config).message());
  core_ = std::make_unique<ShardCore>(std::move(config));
  policy_ = PolicyRegistry::Global().Create(*core_);
}

Result<ShardState> ShardState::Restore(ShardConfig config, const std::string& path) {
  PSTRAIN_RETURN_IF_ERROR(ValidateShardConfig(config));
  PSTRAIN_ASSIGN_OR_RETURN(RestoredShard restored, ReadShardState(path, config));
  const ShardProgress& p = restored.progress;
  ShardState server(std::move(config));
  if (server.policy_->BuffersSteps()) {
    for (int64_t clock : p.worker_clocks) {
      if (clock != p.version) {
        return Status::Error(path + ": not a bsp step boundary (a worker clock " +
                             std::to_string(clock) + " differs from version " +
                             std::to_string(p.version) + ")");
      }
    }
  }
  ShardCore& core = *server.core_;
  server.Install(std::move(restored.layout));
  core.version = p.version;
  core.pushes_applied = p.pushes_applied;
  core.clocks.Restore(p.worker_clocks, p.staleness_max);
  core.staleness_histogram = p.staleness_histogram;
  for (WorkerState& w : core.workers) w.served_version = p.version;
  // No new cut at or below the iteration resumed from.
  server.checkpoint_cut_ = core.clocks.min();
  // The step gate starts closed at the resumed clock: nothing computes until a driver opens it.
  core.gate = core.clocks.min();
  return server;
}

void ShardState::Install(ShardLayout layout) {
  core_->layout = std::move(layout);
  core_->store().set_threads(core_->threads.get());
  const ChunkStore& store = core_->store();
  for (WorkerState& w : core_->workers) {
    w.arrived.assign(static_cast<size_t>(store.num_chunks()), 0);
    w.arrived_count = 0;
    w.served_version = core_->version;
  }
  policy_->Install();
}

transport::ValidationRules ShardState::RulesFor(const pstrain::Header& header) const {
  transport::ValidationRules rules;
  rules.receiver = pstrain::SERVER;
  rules.job_key = core_->config.job_key;
  rules.num_workers = core_->config.num_workers;
  rules.num_servers = core_->config.num_shards;
  if (header.type() != pstrain::INIT_PUSH) {
    rules.placement = placement();
    rules.shard = core_->config.shard;
  }
  return rules;
}

std::vector<Outgoing> ShardState::Handle(const Incoming& m, TimePoint now) {
  Out out;
  const pstrain::Header& h = m.header;
  if (m.wire_bytes >= 0) {
    bytes_received_ += m.wire_bytes;
  } else {
    for (const pstrain::ChunkRef& c : h.chunks()) {
      bytes_received_ += static_cast<int64_t>(c.length() * sizeof(float));
    }
  }
  const bool payload_kind = h.type() == pstrain::PUSH || h.type() == pstrain::INIT_PUSH;
  if (payload_kind && !AllFinite(m, out)) return out;
  switch (h.type()) {
    case pstrain::HELLO:
      OnHello(m, out);
      break;
    case pstrain::INIT_PUSH:
      OnInitPush(m, out);
      break;
    case pstrain::PULL:
      OnPull(m, now, out);
      break;
    case pstrain::PUSH:
      OnPush(m, out);
      break;
    case pstrain::NORM_PARTIAL:
      OnNormPartial(m, out);
      break;
    case pstrain::NORM_TOTAL:
      OnNormTotal(m, out);
      break;
    case pstrain::STATS: {
      Outgoing reply = Reply(m, pstrain::STATS);
      *reply.header.mutable_stats() = Stats();
      out.push_back(std::move(reply));
      break;
    }
    case pstrain::SHUTDOWN:
      out.push_back(Reply(m, pstrain::SHUTDOWN));
      done_ = true;
      break;
    case pstrain::HEARTBEAT:
      break;
    case pstrain::GATE:
      OnGate(m, out);
      break;
    default:
      Reject(m, "a server does not accept this message type", out);
  }
  ServeReadyPulls(out);
  for (const Outgoing& o : out) {
    for (const auto& payload : o.payloads) {
      bytes_sent_ += static_cast<int64_t>(payload->size() * sizeof(float));
    }
  }
  return out;
}

void ShardState::OnHello(const Incoming& m, Out& out) {
  const int w = m.header.sender();
  WorkerState& worker = core_->workers[static_cast<size_t>(w)];
  if (!worker.peer.empty()) {
    Log("worker " + std::to_string(w) + " reconnected (peer " + worker.peer + " -> " + m.peer +
        ")");
    // A process says HELLO once: the old one is gone, or cut off and replaced
    // (its routing id may be the new one's), so its deferred pulls go unanswered.
    std::erase_if(deferred_, [&](const DeferredPull& p) { return p.worker == w; });
  }
  worker.peer = m.peer;
  worker.pull_dtype = m.header.has_pull_dtype() ? m.header.pull_dtype() : pstrain::FLOAT32;
  if (worker.pull_dtype != pstrain::FLOAT32) {
    Log("worker " + std::to_string(w) + " pulls in " + pstrain::DataType_Name(worker.pull_dtype));
  }
  Outgoing reply;
  reply.peer = m.peer;
  reply.header =
      transport::HelloAckHeader(origin(), m.header, core_->clocks.clock(w), core_->version,
                                core_->config.mode, core_->config.num_workers);
  out.push_back(std::move(reply));
}

void ShardState::OnInitPush(const Incoming& m, Out& out) {
  const pstrain::Header& h = m.header;
  if (h.sender() != 0) {
    Reject(m, "only worker 0 sends the initial weights", out);
    return;
  }
  std::vector<pstrain::ParamMeta> params(h.params().begin(), h.params().end());
  if (initialized()) {
    if (!SameParams(params, core_->layout.params)) {
      Reject(m, "its parameters differ from those this shard was initialized with", out);
      return;
    }
    Log("init push from worker 0 again: parameters match, weights kept (version " +
        std::to_string(core_->version) + ")");
    out.push_back(Reply(m, pstrain::INIT_ACK));
    out.back().header.set_version(core_->version);
    return;
  }
  auto layout = MakeShardLayout(std::move(params), core_->config);
  if (!layout.ok()) {
    Reject(m, layout.status().message(), out);
    return;
  }
  ChunkStore& store = *layout->store;
  if (Status s =
          transport::CheckChunkList(h, layout->placement, core_->config.shard, /*complete=*/true);
      !s.ok()) {
    Reject(m, s.message(), out);
    return;
  }
  for (int i = 0; i < h.chunks_size(); ++i) {
    const uint32_t id = h.chunks(i).id();
    store.SetWeights(id, std::span<const float>(m.payloads[static_cast<size_t>(i)],
                                                static_cast<size_t>(store.length(id))));
  }
  Install(std::move(layout).value());
  Log("initialized by worker 0: " + std::to_string(core_->layout.params.size()) + " parameters, " +
      std::to_string(core_->layout.store->num_chunks()) + " chunks here");
  out.push_back(Reply(m, pstrain::INIT_ACK));
  out.back().header.set_version(core_->version);
}

void ShardState::OnGate(const Incoming& m, Out& out) {
  if (!core_->config.step_gate) {
    Reject(m, "this shard has no step gate (start ps-server with --step-gate)", out);
    return;
  }
  const int64_t gate = m.header.clock();
  if (gate < core_->gate) {
    Reject(m,
           "GATE " + std::to_string(gate) + " is below the current gate " +
               std::to_string(core_->gate) + " (a step gate only rises)",
           out);
    return;
  }
  core_->gate = gate;  // Handle's ServeReadyPulls answers the pulls it opens
  if (m.header.gate_checkpoint() && gate > checkpoint_cut_) requested_checkpoints_.insert(gate);
  Outgoing reply = Reply(m, pstrain::GATE_ACK);
  reply.header.set_clock(core_->clocks.min());
  reply.header.set_version(core_->version);
  out.push_back(std::move(reply));
}

pstrain::ShardStats ShardState::Stats() const {
  pstrain::ShardStats s;
  s.set_version(core_->version);
  s.set_pushes_applied(core_->pushes_applied);
  s.set_staleness_max(core_->clocks.max_gap());
  for (int64_t n : core_->staleness_histogram) s.add_staleness_histogram(n);
  s.set_bad_messages(bad_messages_);
  s.set_duplicates_dropped(duplicates_dropped_);
  policy_->AddStats(s);
  s.set_connections_refused(connections_refused_);
  s.set_nonfinite_rejected(nonfinite_rejected_);
  if (!nonfinite_last_.empty()) s.set_nonfinite_last(nonfinite_last_);
  s.set_bytes_received(bytes_received_);
  s.set_bytes_sent(bytes_sent_);
  for (int64_t clock : core_->clocks.clocks()) s.add_worker_clocks(clock);
  return s;
}

ShardProgress ShardState::Progress() const {
  ShardProgress p;
  p.version = core_->version;
  p.pushes_applied = core_->pushes_applied;
  p.worker_clocks = core_->clocks.clocks();
  if (policy_->BuffersSteps()) {
    // Gradients buffered for the step not yet applied are not in the file.
    for (int64_t& clock : p.worker_clocks) clock = std::min(clock, core_->version);
  }
  p.staleness_max = core_->clocks.max_gap();
  p.staleness_histogram = core_->staleness_histogram;
  return p;
}

Status ShardState::WriteCheckpoint(const std::string& path) const {
  if (!initialized()) return Status::Error(path + ": nothing to write before the init push");
  return WriteShardState(path, core_->config, core_->layout, Progress());
}

Outgoing ShardState::Reply(const Incoming& m, pstrain::MessageType type) const {
  Outgoing o;
  o.peer = m.peer;
  o.header = transport::ReplyHeader(origin(), m.header, type);
  return o;
}

void ShardState::Reject(const Incoming& m, const std::string& why, Out& out) {
  ++bad_messages_;
  LogDrop(pstrain::MessageType_Name(m.header.type()) + " from " + Sender(m.header) +
          " rejected: " + why);
  Outgoing reply;
  reply.peer = m.peer;
  reply.header = transport::ErrorHeader(origin(), m.header, why);
  out.push_back(std::move(reply));
}

void ShardState::LogDrop(const std::string& line) const {
  if (drop_log) {
    drop_log("shard " + std::to_string(core_->config.shard) + ": " + line);
  } else {
    Log(line);
  }
}

void ShardState::Log(const std::string& line) const {
  if (log) log("shard " + std::to_string(core_->config.shard) + ": " + line);
}

}  // namespace pstrain::server

// ShardServer: construction, dispatch, HELLO, INIT_PUSH, STATS, checkpoints.
#include "server/shard_server.hpp"

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

ShardServer::ShardServer(ShardConfig config)
    : config_(std::move(config)),
      clocks_(config_.num_workers),
      workers_(static_cast<size_t>(config_.num_workers)) {
  PSTRAIN_CHECK_MSG(ValidateShardConfig(config_).ok(), ValidateShardConfig(config_).message());
}

Result<ShardServer> ShardServer::Restore(ShardConfig config, const std::string& path) {
  PSTRAIN_RETURN_IF_ERROR(ValidateShardConfig(config));
  PSTRAIN_ASSIGN_OR_RETURN(RestoredShard restored, ReadShardState(path, config));
  const ShardProgress& p = restored.progress;
  if (config.mode == ConsistencyMode::kBsp) {
    for (int64_t clock : p.worker_clocks) {
      if (clock != p.version) {
        return Status::Error(path + ": not a bsp step boundary (a worker clock " +
                             std::to_string(clock) + " differs from version " +
                             std::to_string(p.version) + ")");
      }
    }
  }
  ShardServer server(std::move(config));
  server.Install(std::move(restored.layout));
  server.version_ = p.version;
  server.pushes_applied_ = p.pushes_applied;
  server.clocks_.Restore(p.worker_clocks, p.staleness_max);
  server.staleness_histogram_ = p.staleness_histogram;
  for (WorkerState& w : server.workers_) w.served_version = p.version;
  // No new cut at or below the iteration resumed from.
  server.checkpoint_cut_ = server.clocks_.min();
  return server;
}

void ShardServer::Install(ShardLayout layout) {
  layout_ = std::move(layout);
  const ChunkStore& store = *layout_.store;
  for (WorkerState& w : workers_) {
    w.arrived.assign(static_cast<size_t>(store.num_chunks()), 0);
    w.arrived_count = 0;
    w.served_version = version_;
  }
  if (config_.mode == ConsistencyMode::kBsp) {
    std::vector<int64_t> lengths;
    for (uint32_t id : store.chunk_ids()) lengths.push_back(store.length(id));
    const int backups = config_.methods.backup_workers;
    if (backups > 0) {
      backup_step_.emplace(config_.num_workers, config_.num_workers - backups, lengths);
    } else {
      step_.emplace(config_.num_workers, lengths);
    }
    chunk_steps_.assign(lengths.size(), 0);
  }
  if (config_.methods.delay_compensation()) {
    served_weights_.assign(static_cast<size_t>(config_.num_workers),
                           std::vector<std::shared_ptr<const std::vector<float>>>(
                               static_cast<size_t>(store.num_chunks())));
    if (config_.methods.dc_adaptive) {
      dc_mean_square_.clear();
      for (uint32_t id : store.chunk_ids()) {
        dc_mean_square_.emplace_back(static_cast<size_t>(store.length(id)), 0.f);
      }
    }
  }
}

transport::ValidationRules ShardServer::RulesFor(const pstrain::Header& header) const {
  transport::ValidationRules rules;
  rules.receiver = pstrain::SERVER;
  rules.job_key = config_.job_key;
  rules.num_workers = config_.num_workers;
  rules.num_servers = config_.num_shards;
  if (header.type() != pstrain::INIT_PUSH) {
    rules.placement = placement();
    rules.shard = config_.shard;
  }
  return rules;
}

std::vector<Outgoing> ShardServer::Handle(const Incoming& m, TimePoint now) {
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
      OnPull(m, now);
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

void ShardServer::OnHello(const Incoming& m, Out& out) {
  const int w = m.header.sender();
  WorkerState& worker = workers_[static_cast<size_t>(w)];
  if (!worker.peer.empty()) {
    Log("worker " + std::to_string(w) + " reconnected (peer " + worker.peer + " -> " + m.peer +
        ")");
    // A process says HELLO once: the old one is gone, or cut off and replaced
    // (its routing id may be the new one's), so its deferred pulls go unanswered.
    std::erase_if(deferred_, [&](const DeferredPull& p) { return p.worker == w; });
  }
  worker.peer = m.peer;
  Outgoing reply;
  reply.peer = m.peer;
  reply.header = transport::HelloAckHeader(origin(), m.header, clocks_.clock(w), version_,
                                           config_.mode, config_.num_workers);
  out.push_back(std::move(reply));
}

void ShardServer::OnInitPush(const Incoming& m, Out& out) {
  const pstrain::Header& h = m.header;
  if (h.sender() != 0) {
    Reject(m, "only worker 0 sends the initial weights", out);
    return;
  }
  std::vector<pstrain::ParamMeta> params(h.params().begin(), h.params().end());
  if (initialized()) {
    if (!SameParams(params, layout_.params)) {
      Reject(m, "its parameters differ from those this shard was initialized with", out);
      return;
    }
    Log("init push from worker 0 again: parameters match, weights kept (version " +
        std::to_string(version_) + ")");
    out.push_back(Reply(m, pstrain::INIT_ACK));
    out.back().header.set_version(version_);
    return;
  }
  auto layout = MakeShardLayout(std::move(params), config_);
  if (!layout.ok()) {
    Reject(m, layout.status().message(), out);
    return;
  }
  ChunkStore& store = *layout->store;
  if (Status s = transport::CheckChunkList(h, layout->placement, config_.shard, /*complete=*/true);
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
  Log("initialized by worker 0: " + std::to_string(layout_.params.size()) + " parameters, " +
      std::to_string(layout_.store->num_chunks()) + " chunks here");
  out.push_back(Reply(m, pstrain::INIT_ACK));
  out.back().header.set_version(version_);
}

pstrain::ShardStats ShardServer::Stats() const {
  pstrain::ShardStats s;
  s.set_version(version_);
  s.set_pushes_applied(pushes_applied_);
  s.set_staleness_max(clocks_.max_gap());
  for (int64_t n : staleness_histogram_) s.add_staleness_histogram(n);
  s.set_bad_messages(bad_messages_);
  s.set_duplicates_dropped(duplicates_dropped_);
  if (backup_dropped_ > 0) s.set_backup_dropped(backup_dropped_);
  s.set_connections_refused(connections_refused_);
  s.set_nonfinite_rejected(nonfinite_rejected_);
  if (!nonfinite_last_.empty()) s.set_nonfinite_last(nonfinite_last_);
  s.set_bytes_received(bytes_received_);
  s.set_bytes_sent(bytes_sent_);
  for (int64_t clock : clocks_.clocks()) s.add_worker_clocks(clock);
  return s;
}

ShardProgress ShardServer::Progress() const {
  ShardProgress p;
  p.version = version_;
  p.pushes_applied = pushes_applied_;
  p.worker_clocks = clocks_.clocks();
  if (config_.mode == ConsistencyMode::kBsp) {
    // Gradients buffered for the step not yet applied are not in the file.
    for (int64_t& clock : p.worker_clocks) clock = std::min(clock, version_);
  }
  p.staleness_max = clocks_.max_gap();
  p.staleness_histogram = staleness_histogram_;
  return p;
}

Status ShardServer::WriteCheckpoint(const std::string& path) const {
  if (!initialized()) return Status::Error(path + ": nothing to write before the init push");
  return WriteShardState(path, config_, layout_, Progress());
}

Outgoing ShardServer::Reply(const Incoming& m, pstrain::MessageType type) const {
  Outgoing o;
  o.peer = m.peer;
  o.header = transport::ReplyHeader(origin(), m.header, type);
  return o;
}

void ShardServer::Reject(const Incoming& m, const std::string& why, Out& out) {
  ++bad_messages_;
  LogDrop(pstrain::MessageType_Name(m.header.type()) + " from " + Sender(m.header) +
          " rejected: " + why);
  Outgoing reply;
  reply.peer = m.peer;
  reply.header = transport::ErrorHeader(origin(), m.header, why);
  out.push_back(std::move(reply));
}

void ShardServer::LogDrop(const std::string& line) const {
  if (drop_log) {
    drop_log("shard " + std::to_string(config_.shard) + ": " + line);
  } else {
    Log(line);
  }
}

void ShardServer::Log(const std::string& line) const {
  if (log) log("shard " + std::to_string(config_.shard) + ": " + line);
}

}  // namespace pstrain::server

// ShardState: one parameter-server shard as a message-driven state machine,
// without sockets: the dispatcher. ShardLoop (shard_loop.hpp) validates each
// incoming message against RulesFor(), feeds it to Handle and sends what
// Handle returns; tests drive it by hand.
//
// The dispatcher keeps what every consistency method shares (a ShardCore:
// the ChunkStore, the clocks -- a worker's clock = iterations it has
// completely pushed here --, version, statistics) and checkpoints, and routes
// each message. What a gradient does and when a pull may be answered is the
// job of its ConsistencyPolicy (server/consistency_policy.hpp), made by name
// from the config: bsp, ssp, asp and the update methods of
// server/update_methods.hpp, one file each in server/policies/.
// A PULL is answered whole when PullReady holds, or chunk by chunk (in
// PULL_REPLYs with the chunks that became ready together) while PullsByChunk
// and ChunkReady do. A reply's `version` is the shard version when it is sent
// (a chunk ahead of it may already have the step); reply_chunks_total = all
// chunks. Staleness of an applied push: version when it completed minus the
// version the pushing worker was last served (histogrammed in Stats()).
//
// Checkpoint barrier: with snapshot_interval > 0, a PULL for iteration t > 0,
// t % snapshot_interval == 0, waits until every clock == t, then the shard
// writes <snapshot_prefix>_iter_<t>.shard<k>.state and the PULL_REPLY carries
// its path in `text` (empty when the write failed; the failure is logged).
// Barrier pulls are answered whole, in one PULL_REPLY.
//
// 16-bit pulls: a worker whose HELLO asked for pull_dtype FLOAT16 or BFLOAT16
// gets its PULL_REPLYs in it (the weights rounded to nearest even; the master
// weights and history stay float32). A finite weight beyond the range answers
// the pull with ERROR naming the parameter (server/pull_encoding.hpp).
//
// Step gate (config.step_gate, the step_gate policy wrapper): a pull for
// iteration t >= gate() waits; GATE raises the gate (never lowers it) and is
// answered with GATE_ACK (clock: the slowest worker's clock, version).
//
// Not thread-safe: one event loop calls everything.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "common/transport/protocol.hpp"
#include "common/transport/validate.hpp"
#include "proto/pstrain.pb.h"
#include "server/consistency_policy.hpp"
#include "server/factor_relay.hpp"
#include "server/pull_encoding.hpp"
#include "server/shard_checkpoint.hpp"
#include "server/shard_config.hpp"
#include "server/shard_layout.hpp"
#include "server/shard_messages.hpp"

namespace pstrain::server {

class ShardState {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // REQUIRES: ValidateShardConfig(config).ok().
  explicit ShardState(ShardConfig config);
  // A shard resumed from its checkpoint file (ReadShardState's checks; in bsp
  // the state must be a step boundary: every clock == version).
  static Result<ShardState> Restore(ShardConfig config, const std::string& shard_state_path);

  ShardState(ShardState&&) = default;
  ShardState& operator=(ShardState&&) = default;
  ShardState(const ShardState&) = delete;
  ShardState& operator=(const ShardState&) = delete;

  // The rules a message must pass before Handle may take it: the job's key,
  // worker and server counts, the kinds a server accepts, and, once the shard
  // is initialised, its chunks (not for INIT_PUSH).
  transport::ValidationRules RulesFor(const pstrain::Header& header) const;
  // Processes one message; returns the messages to send (replies, deferred
  // PULL_REPLYs that became ready, NORM_* exchanges). A message that is valid
  // but wrong here (a push of a future iteration, a second worker 0 with other
  // parameters) gets an ERROR reply, a log line and a count in bad_messages;
  // it never changes a weight.
  // REQUIRES: transport::Validate(message, RulesFor(message.header)) accepted it.
  std::vector<Outgoing> Handle(const Incoming& message, TimePoint now);
  // Counts a message dropped before Handle (it failed validation, or its
  // header did not parse), so that Stats().bad_messages counts every bad one.
  void CountBadMessage() { ++bad_messages_; }
  // Periodic: logs one line for every pull deferred longer than wait_warn_ms
  // (again at most every wait_warn_ms). Returns no messages today.
  std::vector<Outgoing> Tick(TimePoint now);

  pstrain::ShardStats Stats() const;
  // Writes the shard's state to `path` atomically. In bsp, gradients of a
  // step not yet applied are not saved (the clocks saved exclude them); in
  // ssp/asp a partially pushed iteration would be applied again on resume, so
  // call it at a checkpoint cut (the barrier does).
  Status WriteCheckpoint(const std::string& path) const;

  bool done() const { return done_; }  // a SHUTDOWN was answered
  // Counts CURVE handshakes refused before any message (Stats().connections_refused).
  void CountRefusedConnections(int64_t n) { connections_refused_ += n; }
  // Not ok once the shard must stop (a non-finite value under
  // NonFinitePolicy::kStop: Diverged, naming worker, chunk and clock).
  const Status& failure() const { return failure_; }
  bool initialized() const { return core_->layout.store.has_value(); }
  int64_t version() const { return core_->version; }
  // The step gate (config.step_gate): pulls for iterations >= it wait.
  int64_t gate() const { return core_->gate; }
  const ShardConfig& config() const { return core_->config; }
  const ClockTable& clocks() const { return core_->clocks; }
  const ChunkStore* store() const { return initialized() ? &core_->store() : nullptr; }
  // The job's chunk table once initialised (for validating messages), else null.
  // The pool the passes over a chunk are split over (config.threads; null
  // with one thread): the shard loop rebuilds factor pushes on it too.
  ApplyThreads* apply_threads() const { return core_->threads.get(); }
  const KeyPlacement* placement() const {
    return initialized() ? &core_->layout.placement : nullptr;
  }
  // The registered policies serving this shard: its base, then its wrappers
  // from the innermost out ({"ssp", "staleness_lr"}).
  std::vector<std::string> policy_names() const {
    return PolicyRegistry::Global().Chosen(core_->config);
  }

  // R pushed once (ps-worker --factor-right holder; ShardLoop pairs a push
  // that came without R with its forwarded FACTOR_RIGHT, server/factor_forward.hpp):
  // the PUSH_ACK for such a push, sent when it arrives (its R may come only
  // after the worker's next pull), and the refusal of one outside the relay's
  // scope (RefuseRelay; counted and logged as Handle's refusals are).
  Outgoing Acknowledge(const Incoming& m) const { return Reply(m, pstrain::PUSH_ACK); }
  Outgoing Refuse(const Incoming& m, const std::string& why);

  std::function<void(const std::string&)> log;  // log lines (waits, drops, checkpoints)
  // Lines about refused messages (Reject, non-finite values), which a sender
  // can make many of; unset: they go to `log`. ShardLoop bounds their rate.
  std::function<void(const std::string&)> drop_log;

 private:
  using Out = std::vector<Outgoing>;

  // shard_state.cpp: dispatch, HELLO, INIT_PUSH, replies.
  void OnHello(const Incoming& m, Out& out);
  void OnInitPush(const Incoming& m, Out& out);
  // GATE (config.step_gate): raises core_->gate, answers GATE_ACK with the
  // slowest worker's clock and the version; lowering it is refused.
  void OnGate(const Incoming& m, Out& out);
  void Install(ShardLayout layout);
  transport::Origin origin() const { return core_->origin(); }
  Outgoing Reply(const Incoming& m, pstrain::MessageType type) const;
  void Reject(const Incoming& m, const std::string& why, Out& out);
  void Log(const std::string& line) const;
  void LogDrop(const std::string& line) const;
  ShardProgress Progress() const;

  // shard_state_finite.cpp: true when every payload value of a PUSH or
  // INIT_PUSH is finite; otherwise the message is refused (ERROR to its
  // sender, counted, logged) and, under kStop, failure() is set.
  bool AllFinite(const Incoming& m, Out& out);

  // shard_state_push.cpp: PUSH (clock checks, duplicates, then the policy)
  // and the NORM_* checks before the policy takes them.
  void OnPush(const Incoming& m, Out& out);
  void OnNormPartial(const Incoming& m, Out& out);
  void OnNormTotal(const Incoming& m, Out& out);
  bool ExpectsNorms() const { return initialized() && policy_->ExchangesNorms(); }

  // shard_state_pull.cpp: PULL, the checkpoint barrier, wait warnings.
  void OnPull(const Incoming& m, TimePoint now, Out& out);
  // A driver's (role CONTROL) pull: the current weights at once, whatever the
  // clocks and the gate; no worker's state changes (DistributedSolver.net).
  void OnControlPull(const Incoming& m, Out& out);
  bool IsCheckpointIteration(int64_t t) const;
  // The whole pull may be answered now.
  bool PullReady(const DeferredPull& pull) const;
  // Not a barrier, and the policy answers it chunk by chunk now.
  bool PullsByChunk(const DeferredPull& pull) const;
  void ServeReadyPulls(Out& out);
  // The chunks of `pull` (by local index) not yet sent, that `ready` accepts,
  // in the worker's pull encoding. Error: a weight beyond a 16-bit range
  // (PullEncoding::Encode); nothing is marked sent then.
  Result<Outgoing> PullReply(DeferredPull& pull, const std::function<bool(int)>& ready);
  void CutCheckpoint(int64_t t);
  std::string WaitReason(const DeferredPull& pull) const;

  // At one address for the shard's life: the policy refers to it.
  std::unique_ptr<ShardCore> core_;
  std::unique_ptr<ConsistencyPolicy> policy_;
  std::vector<DeferredPull> deferred_;  // in arrival order
  PullEncoding pull_encoding_;          // within one ServeReadyPulls only
  int64_t bad_messages_ = 0;
  int64_t duplicates_dropped_ = 0;
  int64_t bytes_received_ = 0;
  int64_t bytes_sent_ = 0;
  int64_t checkpoint_cut_ = 0;   // latest iteration cut (or resumed from)
  std::set<int64_t> requested_checkpoints_;  // GATE gate_checkpoint: cut at these too
  std::string checkpoint_path_;  // its file; empty if the write failed
  bool done_ = false;
  int64_t connections_refused_ = 0;
  int64_t nonfinite_rejected_ = 0;
  std::string nonfinite_last_;
  Status failure_;
  std::vector<float> decoded_;  // ChunkGradient::Values() of a compressed chunk
  // Factors kept for the relay (pushes with FactorShape.relay).
  FactorRelayStore relay_;
  // shard_state_relay.cpp: a push's factors kept for the relay, or why not
  // (the message is then refused); a pull's broadcast and history checked.
  bool KeepRelay(const Incoming& m, Out& out);
  bool CheckBroadcastPull(const Incoming& m, Out& out);
  // Chunk `id` is of a weight `pull` takes as factors / with its history.
  bool InBroadcast(const DeferredPull& pull, uint32_t id) const;
  bool InHistory(const DeferredPull& pull, uint32_t id) const;
  // Every chunk here of chunk `id`'s weight is `ready`: they go together, as one relay.
  bool WeightReady(uint32_t id, const std::function<bool(int)>& ready) const;
  // Adds to `o` (a reply to `pull` whose chunks `sent` (local indices) go in
  // it) the history frames and relays the pull asked for; `o`'s payloads
  // hold only its chunk frames on entry. Error: a relay's factors are missing.
  Status AddHistoryAndRelay(const DeferredPull& pull, const std::vector<int>& relayed,
                            const std::vector<int>& sent, Outgoing& o);
  // R pushed once (PULL's rights_ahead): per worker, the pull whose
  // FACTOR_RIGHTs are owed (its peer, its step clock - 1, the parameters not
  // sent yet); SendRightsAhead sends those whose R's are all kept (from
  // OnPull and after each kept push), never waiting for the step.
  struct RightsWanted {
    std::string peer;
    int64_t step = 0;
    std::vector<uint32_t> params;
  };
  std::vector<RightsWanted> rights_wanted_;  // by worker
  void SendRightsAhead(Out& out);
  // This shard is the RelayHolder of some worker's R of `param`.
  bool RelayHolds(int param) const;
};

// Chunk i of a PUSH as it travelled (its header's dtype, its frame).
EncodedGradient PushChunk(const Incoming& m, int i);

}  // namespace pstrain::server

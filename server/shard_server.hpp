// ShardServer: one parameter-server shard as a message-driven state machine,
// without sockets. ShardService (shard_service.hpp) validates each incoming
// message against RulesFor(), feeds it to Handle and sends what Handle
// returns; tests drive it by hand.
//
// Consistency (a worker's clock = iterations it has completely pushed here):
//   bsp  A PULL for iteration t is answered chunk by chunk: each chunk goes
//        out (in a PULL_REPLY with the chunks that became ready together) as
//        soon as that chunk's step t-1 is applied; the last part leaves when
//        version >= t. The W gradients of each chunk are summed in rank
//        order, scaled by 1/W and applied as ONE step (iter = t); version
//        becomes t+1 when every chunk of step t is applied. With
//        clip_gradients >= 0 the step waits for the global norm: each shard
//        sends NORM_PARTIAL (the sum of squares of its averaged gradient) to
//        server 0, which adds all partials in shard order, sends NORM_TOTAL to
//        every other server and applies its own step.
//        A reply's `version` is the shard version when it is sent (a chunk
//        ahead of it already has the step); reply_chunks_total = all chunks.
//   ssp  A PULL for t is answered (whole) once every clock >= t - staleness.
//   asp  A PULL is answered at once.
//   ssp/asp with after_push = a (the worker pushed every chunk of iteration a
//        before asking, on its other connection): once the bound above
//        holds, each chunk goes out as soon as the worker's push a of it is
//        applied (clock > a, or clock == a and the chunk arrived), so the
//        reply never lacks the worker's own last push, as when the pull came
//        behind it on one connection.
//   ssp/asp apply every pushed chunk on arrival, scaled 1/W (and by the clip
//        factor of the push's own sum_squares). version counts global steps:
//        floor(complete pushes applied / W); it is also the lr schedule's iter.
//        So a checkpoint cut at iteration t has version t in every mode.
// Update methods (config.methods, server/update_methods.hpp):
//   bsp with backup_workers b: step t applies, per chunk, the first W-b
//        gradients of iteration t to arrive (summed in rank order, scaled
//        1/(W-b)); later ones, and every push of an iteration < version, are
//        acknowledged and dropped (ShardStats.backup_dropped counts chunks).
//        A pull for t also waits until the puller's own clock is t (each chunk
//        until it pushed that chunk), so its weights never change under its
//        backward. A dropped worker keeps its own clock and catches up (its
//        pulls are answered at once while version > its clock).
//   ssp/asp with staleness_lr: a chunk's scale is multiplied by
//        1 / max(1, version - the version its worker was last served).
//   ssp/asp with dc_lambda (DC-ASGD): the shard keeps the buffers it last
//        served each worker and compensates each pushed chunk before the step.
// Staleness of an applied push: version when it completed minus the version
// the pushing worker was last served (histogrammed in Stats()).
//
// Checkpoint barrier: with snapshot_interval > 0, a PULL for iteration t > 0,
// t % snapshot_interval == 0, waits until every clock == t, then the shard
// writes <snapshot_prefix>_iter_<t>.shard<k>.state and the PULL_REPLY carries
// its path in `text` (empty when the write failed; the failure is logged).
// Barrier pulls are answered whole, in one PULL_REPLY.
//
// Not thread-safe: one event loop calls everything.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "common/transport/protocol.hpp"
#include "common/transport/validate.hpp"
#include "proto/pstrain.pb.h"
#include "server/clock_table.hpp"
#include "server/rank_ordered_sum.hpp"
#include "server/shard_checkpoint.hpp"
#include "server/shard_config.hpp"
#include "server/shard_layout.hpp"
#include "server/update_methods.hpp"

namespace pstrain::server {

// A message as the transport delivers it, validated (transport::Validate with
// ShardServer::RulesFor(header)): one payload of chunks[i].length floats per
// chunk, each chunk held by this shard (but for an INIT_PUSH, which the shard
// checks against the layout it builds from it). The payloads stay valid for
// the duration of Handle only.
struct Incoming {
  std::string peer;  // the transport's id of the sender, for replies
  pstrain::Header header;
  // One per header.chunks; the shard may overwrite them (gradients are applied
  // in place, without a copy).
  std::vector<float*> payloads;
  // Payload bytes as they travelled (compressed pushes); -1: 4 per value.
  int64_t wire_bytes = -1;
};

struct Outgoing {
  enum class To {
    kPeer,         // `peer`
    kCoordinator,  // server 0 (NORM_PARTIAL)
    kAllServers,   // every server but this one (NORM_TOTAL from server 0)
  } to = To::kPeer;
  std::string peer;
  pstrain::Header header;
  std::vector<std::shared_ptr<const std::vector<float>>> payloads;  // one per header.chunks
};

class ShardServer {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // REQUIRES: ValidateShardConfig(config).ok().
  explicit ShardServer(ShardConfig config);
  // A shard resumed from its checkpoint file (ReadShardState's checks; in bsp
  // the state must be a step boundary: every clock == version).
  static Result<ShardServer> Restore(ShardConfig config, const std::string& shard_state_path);

  ShardServer(ShardServer&&) = default;
  ShardServer& operator=(ShardServer&&) = default;
  ShardServer(const ShardServer&) = delete;
  ShardServer& operator=(const ShardServer&) = delete;

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
  bool initialized() const { return layout_.store.has_value(); }
  int64_t version() const { return version_; }
  const ShardConfig& config() const { return config_; }
  const ClockTable& clocks() const { return clocks_; }
  const ChunkStore* store() const { return layout_.store ? &*layout_.store : nullptr; }
  // The job's chunk table once initialised (for validating messages), else null.
  const KeyPlacement* placement() const { return initialized() ? &layout_.placement : nullptr; }

  std::function<void(const std::string&)> log;  // log lines (waits, drops, checkpoints)
  // Lines about refused messages (Reject, non-finite values), which a sender
  // can make many of; unset: they go to `log`. ShardService bounds their rate.
  std::function<void(const std::string&)> drop_log;

 private:
  using Out = std::vector<Outgoing>;
  struct WorkerState {
    std::string peer;           // latest peer that said HELLO as this rank
    std::vector<char> arrived;  // per local chunk: received for the current clock
    int arrived_count = 0;
    int64_t served_version = 0;  // version of the weights last pulled
  };
  struct DeferredPull {
    std::string peer;
    int worker = 0;
    int64_t clock = 0;
    TimePoint since, last_warning;
    std::vector<char> sent;  // per local chunk: already in a partial reply
    int sent_count = 0;
    // ssp/asp: the puller's push that must be applied first (chunk by
    // chunk), -1: none (the header's after_push).
    int64_t after_push = -1;
  };

  // shard_server.cpp: dispatch, HELLO, INIT_PUSH, replies.
  void OnHello(const Incoming& m, Out& out);
  void OnInitPush(const Incoming& m, Out& out);
  void Install(ShardLayout layout);
  transport::Origin origin() const { return {pstrain::SERVER, config_.shard, config_.job_key}; }
  Outgoing Reply(const Incoming& m, pstrain::MessageType type) const;
  void Reject(const Incoming& m, const std::string& why, Out& out);
  void Log(const std::string& line) const;
  void LogDrop(const std::string& line) const;
  ShardProgress Progress() const;

  // shard_server_finite.cpp: true when every payload value of a PUSH or
  // INIT_PUSH is finite; otherwise the message is refused (ERROR to its
  // sender, counted, logged) and, under kStop, failure() is set.
  bool AllFinite(const Incoming& m, Out& out);

  // shard_server_push.cpp: PUSH and the BSP step with its norm exchange.
  void OnPush(const Incoming& m, Out& out);
  float ArrivalScale(const pstrain::Header& h) const;
  void WorkerCompleted(int worker);
  void RecordStaleness(int worker);
  void BspAggregated(Out& out);
  bool ExpectsNorms() const;
  void OnNormPartial(const Incoming& m, Out& out);
  void OnNormTotal(const Incoming& m, Out& out);
  void NotePartial(int shard, int64_t clock, double sum_squares, Out& out);
  void NormTotalKnown(int64_t clock, double total);
  void ApplyBspStep(double global_sum_squares);
  void FinishBspStep();
  // bsp: the number of gradients one step averages (W, or W-b with backups).
  int StepWorkers() const;
  float* StepSum(int local);
  // bsp with backups: offers worker w's gradient of a chunk to the step.
  void OfferBackup(int w, int64_t t, uint32_t id, int local, float* grad);
  // ssp/asp with dc_lambda: the delay compensation of worker w's gradient.
  void Compensate(int w, uint32_t id, int local, float* grad);

  // shard_server_pull.cpp: PULL, the checkpoint barrier, wait warnings.
  void OnPull(const Incoming& m, TimePoint now);
  bool IsCheckpointIteration(int64_t t) const;
  // The whole pull may be answered now.
  bool PullReady(const DeferredPull& pull) const;
  // Not a barrier, and bsp, or ssp/asp with after_push whose consistency
  // bound holds: the pull may go out chunk by chunk.
  bool PullsByChunk(const DeferredPull& pull) const;
  bool ChunkReady(int local, const DeferredPull& pull) const;
  void ServeReadyPulls(Out& out);
  // The chunks of `pull` (by local index) not yet sent, that `ready` accepts.
  Outgoing PullReply(DeferredPull& pull, const std::function<bool(int)>& ready);
  void CutCheckpoint(int64_t t);
  std::string WaitReason(const DeferredPull& pull) const;

  ShardConfig config_;
  ClockTable clocks_;
  std::vector<WorkerState> workers_;
  ShardLayout layout_;                        // store unset until INIT_PUSH (or Restore)
  std::optional<RankOrderedSum> step_;        // bsp: the sums of step `version_`
  std::optional<BackupStepSum> backup_step_;  // bsp with backup workers (step_ then unset)
  int64_t backup_dropped_ = 0;
  // DC-ASGD: [worker][local chunk] the buffer last served; [local] mean squares (adaptive).
  std::vector<std::vector<std::shared_ptr<const std::vector<float>>>> served_weights_;
  std::vector<std::vector<float>> dc_mean_square_;
  int step_chunks_complete_ = 0;  // bsp: chunks of step version_ with all W gradients
  // bsp, per local chunk: version_ + 1 once its step version_ is applied
  // ahead of the rest; at most version_ otherwise (the version is max of both).
  std::vector<int64_t> chunk_steps_;
  std::map<int64_t, std::vector<std::optional<double>>> norm_partials_;  // server 0: [clock][shard]
  std::optional<std::pair<int64_t, double>> norm_total_;  // received before the own sums were done
  std::vector<DeferredPull> deferred_;                    // in arrival order
  int64_t version_ = 0;
  int64_t pushes_applied_ = 0;
  std::vector<int64_t> staleness_histogram_;
  int64_t bad_messages_ = 0;
  int64_t duplicates_dropped_ = 0;
  int64_t bytes_received_ = 0;
  int64_t bytes_sent_ = 0;
  int64_t checkpoint_cut_ = 0;   // latest iteration cut (or resumed from)
  std::string checkpoint_path_;  // its file; empty if the write failed
  bool done_ = false;
  int64_t connections_refused_ = 0;
  int64_t nonfinite_rejected_ = 0;
  std::string nonfinite_last_;
  Status failure_;
};

}  // namespace pstrain::server

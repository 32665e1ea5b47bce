// PsClient: a worker's connection to the parameter-server shards (two
// ZeroMQ DEALERs per shard: requests and pushes, and pulls) — ps-lite's small
// asynchronous API.
//
//   Pull(t)  asks every shard for the weights to compute iteration t;
//   WaitPull waits until every chunk has arrived. A shard may answer in
//            several PULL_REPLYs (bsp: each chunk once its step is applied);
//            each is copied straight into the net's parameter blobs as soon
//            as it is received, also while Push or Flush waits for acks (so
//            in bsp a pull may be sent before backward: a chunk's new value
//            exists only after this worker pushed that chunk's gradient);
//   Push(params, t) sends those parameters' gradients (per layer, as backward
//            produces them), at most `max_pushes_in_flight` unacknowledged per
//            shard, so memory stays bounded;
//   Flush    waits for every push to be acknowledged.
// Gradients go to ZeroMQ straight from the blobs' diffs (no copy) over tcp
// and ipc; the caller must not write a diff it pushed until the next WaitPull
// or Flush returns, which wait until ZeroMQ has let go of every such payload
// (the training loop writes diffs only after the next WaitPull). Over inproc
// (where the server would read, and apply in place on, the worker's very
// memory), for compressed pushes and for Push with explicit `diffs`, they are
// staged into reused buffers, which return to the pool when ZeroMQ lets go.
// A shard's PUSH is sent as messages of at most kMessagePartBytes
// (common/transport/protocol.hpp), so the shard applies part k while part k+1
// travels; each counts against the in-flight window.
// PULL goes on a second DEALER per shard (docs/wire-protocol.md, "Pulls
// beside pushes"): in bsp always, in ssp/asp when every chunk of the shard
// was pushed for iteration t-1 (after_push = t-1: the shard serves each chunk
// once its part of that push is applied), so the request does not queue
// behind the push parts and the reply streams back while they arrive.
// Pull replies are float32, or 16-bit when options.pull_compression asks for
// it in HELLO (decoded straight into the blobs; a reply in another encoding
// than the one granted is an error naming the shard).
// Every message from a shard is validated on arrival (transport::Validate:
// the kinds a worker accepts, the job key, PULL_REPLY chunks against the
// shard's part of the placement); one that fails is an error naming the
// shard. Every wait is bounded by `timeout`: a shard that stays silent that
// long is an error naming its address (DeadlineExceeded).
// Retries: a send that fails with a retryable status (Status::IsRetryable: a
// shard gone or not reachable, a queue still full after the socket's send
// timeout) is sent again, after 50 ms, then twice as long each time up to
// 1 s, until it goes through or `timeout` has passed since the first try;
// then the last failure is returned, saying how many tries were made. Nothing
// else is retried: a failure of another kind (a malformed message, a refused
// request) returns at once, and a shard silent for `timeout` is already past
// the bound. A failed ZeroMQ send queues nothing, so a retry never duplicates.
// Liveness: while the client exists, a thread of its own sends HEARTBEAT to
// every shard it has sent nothing else for `heartbeat_interval` (also while
// the caller computes), on connections of its own.
// Used by one thread (besides its heartbeat thread).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/blob.hpp"
#include "common/ps/consistency_mode.hpp"
#include "common/ps/key_placement.hpp"
#include "common/status.hpp"
#include "common/transport/channel.hpp"
#include "common/transport/gpu_path.hpp"
#include "common/transport/gradient_codec.hpp"
#include "common/transport/protocol.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain {

// A parameter the servers hold: its blob (data pulled into, diff pushed from).
class FactorBroadcast;  // worker/ps/factor_broadcast.hpp

struct PsParam {
  std::string name;
  Blob* blob = nullptr;
  float lr_mult = 1.f;
  float decay_mult = 1.f;
};

// A weight gradient as its sufficient factors (common/ps/sufficient_factors.hpp):
// gradient = left^T right, left samples x the weight's rows (shape(0)), right
// samples x its row length (count / shape(0)); both row-major host memory.
struct GradientFactors {
  int64_t samples = 0;
  const float* left = nullptr;
  const float* right = nullptr;
};

struct PsClientOptions {
  std::vector<std::string> servers;  // shard k's endpoint at index k
  // WORKER: worker `rank` (its DEALERs are named worker-R...). CONTROL: a
  // driver (orchestrator or tool, `rank` 0: the orchestrator's key under
  // CURVE), DEALERs named control-R, no heartbeats; it sends only STATS,
  // SHUTDOWN and GATE (SetGate, WaitForClock): Hello, InitPush, Pull and Push
  // are errors. A driver cannot be a WORKER client beside the workers: it
  // would take over worker R's routing id.
  pstrain::Role role = pstrain::WORKER;
  int rank = 0;
  int world_size = 1;
  uint64_t job_key = 0;
  // A keys folder (common/transport/curve.hpp): every DEALER uses CURVE with
  // this worker's key pair (worker-R.key/.pub) and server-K.pub for shard K.
  // "": no CURVE.
  std::string keys;
  // ipc: pushes of 16 KB or more per chunk go through a shared-memory ring of
  // this many MiB per shard (common/transport/shared_ring.hpp); 0: through
  // the socket. The shards must run with shared memory too.
  int shared_memory_mb = 0;
  ConsistencyMode mode = ConsistencyMode::kBsp;  // every shard must run this mode (HELLO_ACK)
  int64_t chunk_bytes = 1 << 20;
  int max_pushes_in_flight = 16;  // per shard
  std::chrono::milliseconds timeout{120000};
  // 0: no heartbeats.
  std::chrono::milliseconds heartbeat_interval = transport::kHeartbeatInterval;
  // Gradient compression of pushes (common/transport/gradient_codec.hpp):
  // FLOAT32 none, FLOAT16, TOP_K (topk_ratio of each chunk's values) or SIGN_SCALED.
  pstrain::DataType compression = pstrain::FLOAT32;
  double topk_ratio = 0.01;
  bool error_feedback = true;  // top-k and sign: carry what the encoding lost to the next push
  // The encoding of pull replies, asked for in HELLO: FLOAT32 (none), FLOAT16
  // or BFLOAT16 (the shard rounds its float32 weights to nearest even; the
  // blobs get the decoded values). A shard that does not grant it fails Hello.
  pstrain::DataType pull_compression = pstrain::FLOAT32;
  // Sufficient-factor broadcasting with R pushed once (ps-worker
  // --factor-right holder; docs/architecture.md, "R pushed once"): a relayed
  // factor push carries R only to this worker's holder shard (RelayHolder),
  // L alone (FactorShape.right_forwarded) to the weight's other shards; each
  // FACTOR_RIGHT a holder sends ahead of a step (PULL's rights_ahead, set by
  // FactorBroadcast) is forwarded to the shards of `forward_shards` that hold
  // rows of the weight and are not that worker's holder. forward_shards
  // empty: the shards k with k % world_size == rank (-1 in it matches no shard).
  bool factor_right_holder = false;
  std::vector<int> forward_shards;
  // GPU IPC pushes (common/transport/gpu_path.hpp): a GPU worker's offer
  // (worker/ps/gpu_region.hpp), sent in every HELLO; unset: none. gpu_ipc
  // kOn makes a shard's refusal a Hello error.
  std::optional<pstrain::GpuIpcOffer> gpu_ipc_offer;
  transport::GpuIpcSwitch gpu_ipc = transport::GpuIpcSwitch::kAuto;
  // Tests: wraps each request and pull DEALER as it is connected (e.g. in a
  // transport::FaultChannel that fails sends). Empty: none.
  std::function<std::unique_ptr<transport::Channel>(std::unique_ptr<transport::Channel>)>
      wrap_channel;
};

// What a driver learns from the shards (SetGate, WaitForClock): the smallest
// over the shards of the slowest worker's clock (iterations every worker has
// completely pushed) and of the version (global steps applied).
struct GateState {
  int64_t slowest_clock = 0;
  int64_t version = 0;
};

struct PsTraffic {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  double pull_wait_seconds = 0;  // time spent in WaitPull
  double push_wait_seconds = 0;  // time spent blocked on the in-flight window
  int64_t send_retries = 0;      // sends tried again after a retryable failure
  int64_t gpu_ipc_pushes = 0;    // PUSH messages sent as GPU IPC slices (PushIpc)
  int64_t rights_forwarded = 0;  // FACTOR_RIGHTs forwarded (factor_right_holder)
};

class PsClient {
 public:
  // `context` must outlive the client.
  static Result<std::unique_ptr<PsClient>> Connect(transport::Context& context,
                                                   const PsClientOptions& options,
                                                   std::vector<PsParam> params);
  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;
  ~PsClient();

  // Greets every shard; `clock` receives the smallest clock the shards hold
  // for this worker (0 for a fresh job, the resumed iteration otherwise).
  // Error: a shard runs another consistency mode than options.mode, or does
  // not grant options.pull_compression.
  Status Hello(int64_t* clock);
  // Rank 0: sends the parameters' metadata and current values to the shards.
  Status InitPush();
  // Asks every shard for the weights of iteration `clock`.
  Status Pull(int64_t clock);
  // Waits until every chunk of the last Pull has been copied into the blobs.
  // `version` receives the smallest shard version; `checkpoint_files` the
  // shard checkpoint paths when the pull was a snapshot barrier.
  Status WaitPull(int64_t* version, std::vector<std::string>* checkpoint_files);
  // Waits until every chunk of params `param_ids` of the last Pull has been
  // copied into the blobs (the others may still be on their way; WaitPull
  // completes the pull). Bounded by `timeout` as WaitPull (DeadlineExceeded
  // naming the shards that still owe one of those chunks); the time counts in
  // pull_wait_seconds. Used to start a layer's forward before the whole pull
  // is in (PsWorker, --pull-overlap). Error: no pull outstanding.
  Status WaitParams(const std::vector<int>& param_ids);
  // Waits (up to options_.timeout) until ZeroMQ let go of every diff pushed
  // without a copy, as WaitPull ends with: after it the caller may write the
  // diffs while the pull is still arriving. The time counts in pull_wait_seconds.
  Status ReleaseDiffs();
  // Pushes the gradients (blob diffs) of params `param_ids` for iteration `clock`.
  // `sum_squares` < 0 when unknown (only needed for clipping in ssp/asp).
  // REQUIRES: the diffs stay unchanged until the next WaitPull or Flush returns.
  Status Push(const std::vector<int>& param_ids, int64_t clock, double sum_squares);
  // As Push, but param_ids[i]'s gradient is read from diffs[i] (host memory
  // of the blob's count() floats, e.g. a pinned copy of a GPU diff); copied
  // before it returns.
  Status Push(const std::vector<int>& param_ids, int64_t clock, double sum_squares,
              const std::vector<const float*>& diffs);
  // As Push for one parameter whose gradient is `factors` (its diff is not
  // read): each shard holding chunks of it gets one PUSH with Header.factors,
  // the columns of left its chunks' rows need and all of right (copied before
  // it returns), in FactorDtype(options.compression): 16-bit when pushes are
  // FLOAT16 or BFLOAT16 (Header.dtype), else float32.
  // REQUIRES: the param's blob has at least one axis.
  // relay: the shards keep the factors for the factor relay (FactorShape.relay).
  Status PushFactors(int param_id, int64_t clock, const GradientFactors& factors,
                     bool relay = false);
  // As Push, for a GPU worker whose offer every shard accepted
  // (gpu_path().ipc): the gradients were copied into its GPU IPC region
  // (GpuGradientRegion::Start, param p at byte `offsets[p]`) and each shard
  // gets their chunks' offsets instead of values (ps_client_gpu_ipc.cpp).
  // Error: FailedPrecondition when gpu_path().ipc is false.
  Status PushIpc(const std::vector<int>& param_ids, int64_t clock,
                 const std::vector<uint64_t>& offsets);
  // The path Hello chose for pushes (sockets, with the reason, until Hello).
  const transport::GpuPathDecision& gpu_path() const { return gpu_path_; }
  // Waits until every push is acknowledged (and ZeroMQ let go of its payloads).
  Status Flush();
  // Asks each shard to exit (the job is over).
  Status Shutdown();
  Result<std::vector<pstrain::ShardStats>> Stats();
  // The step gate (shards started with --step-gate, server/policies/step_gate.cpp),
  // for a driver (role CONTROL, or worker 0's own client): opens every shard's gate to `gate`
  // (GATE; workers may then compute iterations < gate) and waits for every
  // GATE_ACK. Error: a shard refused (no step gate; `gate` below its gate).
  // checkpoint: the shards also cut a checkpoint at iteration `gate` (written
  // once the gate rises above it; worker 0 then writes the .caffemodel and manifest).
  Result<GateState> SetGate(int64_t gate, bool checkpoint = false);
  // Polls every shard's STATS every few milliseconds until on every shard
  // every worker's clock is >= `clock` (every push of the iterations < clock
  // is in); returns that state. It does not wait for a step the shards still
  // owe (bsp with clipping applies step clock - 1 after the norm exchange), so
  // `version` may be below `clock`. Error (DeadlineExceeded) after `timeout`,
  // naming the clock and the slowest shard's clocks.
  Result<GateState> WaitForClock(int64_t clock, std::chrono::milliseconds timeout);

  const KeyPlacement& placement() const { return placement_; }
  const PsTraffic& traffic() const { return traffic_; }
  // Sufficient-factor broadcasting (worker/ps/factor_broadcast.hpp): every
  // Pull asks for the broadcast weights as `broadcast` says, its replies'
  // factors and history go to it, and WaitPull ends with its Finish (the
  // blobs of those weights get the replica's values). Not owned; null: off.
  void set_factor_broadcast(FactorBroadcast* broadcast) { factor_broadcast_ = broadcast; }
  // R pushed once: forward every R to every shard that needs it, not only to
  // forward_shards (worker 0's pull of max_iter, which it alone sends: the
  // other forwarders do not pull that step's R's).
  void set_forward_all(bool all) { forward_all_ = all; }

 private:
  class Heartbeats;   // ps_client.cpp: the heartbeat thread
  class SendTracker;  // ps_client.cpp: payloads ZeroMQ still holds of the blobs' diffs

  PsClient() = default;
  transport::Origin origin() const { return {options_.role, options_.rank, options_.job_key}; }
  // Ok for a WORKER client; for a CONTROL one, the error that `what` needs a worker.
  Status NeedsWorker(const char* what) const;
  // On shard's pull connection when `pull_connection`, else on its main one;
  // a retryable failure is retried (see the top of this file).
  Status Send(int shard, transport::OutMessage message, bool pull_connection = false);
  // "server 1 (tcp://10.0.0.2:40001)"
  std::string ServerName(size_t shard) const;
  // Receives one message (any shard) within `timeout`, handles acks and
  // errors, and returns it (nullopt when none arrived in time).
  Result<std::optional<std::pair<int, transport::InMessage>>> ReceiveOne(
      std::chrono::milliseconds timeout);
  // Receives until every shard in `waiting` answered with `type`.
  Status AwaitFromShards(pstrain::MessageType type, std::vector<bool> waiting,
                         std::vector<transport::InMessage>* replies);
  std::shared_ptr<std::vector<float>> StagingBuffer(size_t count);
  // Checks a (partial) PULL_REPLY from `shard` against the outstanding pull
  // (its iteration, no chunk twice) and copies its chunks into the blobs.
  // REQUIRES: the reply passed Validate with this shard's rules.
  Status AcceptPullReply(int shard, const transport::InMessage& reply);
  // No answer from the shards `waiting` for options_.timeout.
  Status Silent(const std::vector<bool>& waiting) const;
  // Waits (up to options_.timeout) until ZeroMQ let go of every diff pushed
  // without a copy.
  Status WaitDiffsReleased();
  // Sends a shard's push in parts of at most kMessagePartBytes, each within
  // the in-flight window.
  Status SendPush(int shard, const pstrain::Header& header, transport::OutMessage message);
  // Sends one push message whole (not split), within the in-flight window.
  Status SendPushPart(int shard, transport::OutMessage message);
  // Hello's choice of the push path from the shards' HELLO_ACKs (gpu_path_).
  Status ChooseGpuPath(const std::vector<transport::InMessage>& acks);
  // ps_client_forward.cpp: a FACTOR_RIGHT from `shard` (validated): forwarded
  // to the shards this worker forwards to that need it, and handed to the
  // factor broadcast's replica.
  Status OnFactorRight(int shard, const transport::InMessage& right);
  // Push's bookkeeping for Pull's after_push: chunks `ids` went to `shard` for `clock`.
  void NotePushed(size_t shard, int64_t clock, const std::vector<uint32_t>& ids);

  PsClientOptions options_;
  std::vector<PsParam> params_;
  KeyPlacement placement_;
  std::unique_ptr<SendTracker> sends_;  // before channels_: outlives the sockets
  std::vector<bool> zero_copy_;         // per shard: pushes go from the diffs (not inproc)
  std::vector<std::unique_ptr<transport::Channel>> channels_;
  // Per shard, a second DEALER for pull requests and their replies (Pull).
  std::vector<std::unique_ptr<transport::Channel>> pull_channels_;
  std::vector<transport::Channel*> channel_ptrs_;  // channels_, then pull_channels_
  // Pushes so far: per chunk id, the latest clock it was pushed with; per
  // shard, the latest clock pushed to it and how many distinct chunks of
  // that clock (Pull sets after_push when that is all of the shard's).
  std::vector<int64_t> chunk_push_clock_;
  std::vector<int64_t> shard_push_clock_;
  std::vector<int64_t> shard_pushed_;
  std::vector<bool> shard_has_chunks_;
  std::vector<int> in_flight_;
  std::vector<std::shared_ptr<std::vector<float>>> pool_;
  // Per chunk id, created at its first compressed push (residuals for error feedback).
  std::vector<std::unique_ptr<transport::GradientEncoder>> encoders_;
  std::vector<float> encoded_;  // scratch of one chunk's encoding
  std::vector<float> factor_columns_;  // PushFactors: L's columns of one shard
  int64_t pull_clock_ = -1;
  // The outstanding pull: per chunk id, arrived; per shard, chunks still
  // missing, the largest version of its replies and its checkpoint path.
  std::vector<char> pull_arrived_;
  std::vector<int64_t> pull_missing_;
  std::vector<int64_t> pull_version_;
  std::vector<std::string> pull_files_;
  bool pull_outstanding_ = false;
  FactorBroadcast* factor_broadcast_ = nullptr;  // set_factor_broadcast
  bool forward_all_ = false;                     // set_forward_all
  transport::GpuPathDecision gpu_path_{false, "no HELLO yet"};
  PsTraffic traffic_;
  std::unique_ptr<Heartbeats> heartbeats_;  // last: stopped first
};

// "120 s", "0.3 s": a wait in PsClient's messages.
std::string SecondsText(std::chrono::milliseconds ms);

}  // namespace pstrain

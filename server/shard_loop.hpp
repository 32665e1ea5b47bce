// ShardLoop: one shard's socket loop, the ps-server program without its
// flags and signals.
//
// Create binds the shard's ROUTER (and, on shards > 0, a DEALER to server 0
// for the gradient-norm exchange). Run then polls them until a SHUTDOWN has
// been answered or Stop is called:
//   - with a keys folder (options.keys, common/transport/curve.hpp) both
//     sockets use CURVE: the ROUTER admits only the folder's public keys,
//     each as the peer its file names, and every header must come from the
//     key of the (role, sender) it claims; refused connections are counted
//     (STATS connections_refused) and logged;
//   - every message is validated once, on arrival, against
//     ShardState::RulesFor; one that fails (or whose header does not parse)
//     is logged with its reason, counted in the shard's bad_messages (STATS)
//     and dropped without an answer; drops and refusals are logged in full
//     for the first `drop_log_lines`, then as one count line per
//     `drop_log_interval` (DropLog);
//   - a valid one goes to ShardState::Handle, and what Handle returns is sent
//     (NORM_TOTAL to every server that has sent this shard a message); a
//     HELLO's GPU IPC offer is answered in its HELLO_ACK and a GPU IPC PUSH's
//     slices are read from the worker's region first (GpuIpcReader);
//   - every `tick` the shard logs pulls that waited too long, and the
//     liveness table is checked: a worker not heard from (any valid message,
//     HEARTBEAT included) for `silence_warning` is logged once, naming its
//     rank and clock, and again when it is heard from later;
//   - after `idle_exit` without any message Run fails, and so it does when
//     the shard fails (a non-finite value under NonFinitePolicy::kStop).
//
// Threads: Create, Run and shard() on one thread at a time; Stop from any
// thread, or from a signal handler (it only sets an atomic flag). Run notices
// Stop within one `poll` interval.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "common/transport/channel.hpp"
#include "common/transport/context.hpp"
#include "common/transport/liveness.hpp"
#include "common/transport/protocol.hpp"
#include "server/drop_log.hpp"
#include "server/factor_arrival.hpp"
#include "server/factor_forward.hpp"
#include "server/gpu_ipc_reader.hpp"
#include "server/pull_reply_order.hpp"
#include "server/shard_state.hpp"

namespace pstrain::server {

struct ShardLoopOptions {
  std::string bind = "tcp://127.0.0.1:0";  // an address as MakeAddress makes it; port 0: any
  std::string coordinator;                 // shards > 0: server 0's endpoint ("" = none)
  std::chrono::milliseconds idle_exit{
      600000};                           // Run fails after this long without a message; 0: never
  std::chrono::milliseconds tick{1000};  // how often Tick and the liveness check run
  std::chrono::milliseconds silence_warning = transport::kSilenceWarning;
  std::chrono::milliseconds poll{100};  // longest single wait for a message
  // > 0: a worker whose clock here reached this has finished training; its
  // silence is no longer reported.
  int64_t max_iter = 0;
  std::function<void(const std::string&)> log;  // one line each; may be empty
  // A worker silent past silence_warning, reported once per silence. Unset:
  // `log` gets SilenceWarning's sentence. ps-server prints it as a `stall`
  // event, which ps-train reads by its fields, not by its words.
  struct Silence {
    int worker = 0;
    int64_t clock = 0;  // the worker's clock here
    double seconds = 0;
  };
  std::function<void(const Silence&)> on_silence;
  // A keys folder: this shard's key pair (server-K.key/.pub), the public keys
  // it admits and server 0's (for the coordinator DEALER). "": no CURVE.
  std::string keys;
  // ipc: each peer's replies of 16 KB or more go through a shared-memory ring
  // of this many MiB (common/transport/shared_ring.hpp); 0: through the socket.
  int shared_memory_mb = 0;
  int drop_log_lines = 10;
  std::chrono::milliseconds drop_log_interval{10000};
  // > 0: pull replies go in forward order (lowest chunk id first) with at
  // most about this many bytes held by ZeroMQ per peer (server/pull_reply_order.hpp;
  // ps-server --pull-overlap). 0: each reply goes as soon as it is ready.
  size_t pull_window_bytes = 0;
};

// "warning: worker 1 (clock 7) has been silent for 10.0 s".
std::string SilenceWarning(const ShardLoopOptions::Silence& silence);

class ShardLoop {
 public:
  enum class Ending {
    kShutdown,  // a SHUTDOWN was answered
    kStopped,   // Stop() was called
  };

  // Errors: the address cannot be bound, the coordinator cannot be connected.
  static Result<std::unique_ptr<ShardLoop>> Create(transport::Context& context, ShardState shard,
                                                   ShardLoopOptions options);
  ShardLoop(const ShardLoop&) = delete;
  ShardLoop& operator=(const ShardLoop&) = delete;
  ~ShardLoop();

  // The bound endpoint, its port resolved ("tcp://127.0.0.1:40123").
  const std::string& endpoint() const;
  // Payload bytes the ROUTER moved through shared memory (ipc).
  transport::RingTraffic ring_traffic() const;
  // Serves until SHUTDOWN or Stop. Errors: no message for idle_exit (marked
  // retryable: DeadlineExceeded), a failing poll, the shard's failure().
  Result<Ending> Run();
  // Makes Run return kStopped within one poll interval. Async-signal-safe.
  void Stop() { stop_.store(true, std::memory_order_relaxed); }

  // The shard, for its statistics and checkpoint once Run has returned.
  // REQUIRES: Run is not running.
  ShardState& shard() { return shard_; }

 private:
  using TimePoint = ShardState::TimePoint;
  ShardLoop(ShardState shard, ShardLoopOptions options);

  Result<Ending> Serve();
  void Receive(transport::Channel* channel, TimePoint now);
  void SendAll(std::vector<Outgoing> outgoing);
  // Sends what pull_order_ lets go now (all of it when `all`).
  void SendOrderedPulls(bool all);
  // One message (or part) to where `o` goes.
  void Send(const Outgoing& o, transport::OutMessage m);
  void CheckLiveness(TimePoint now);
  void CountRefusals(TimePoint now);
  void Heard(const pstrain::Header& header, TimePoint now);
  // GPU IPC pushes (server/gpu_ipc_reader.hpp; shard_loop_gpu_ipc.cpp): the
  // answer to a HELLO's offer, set on the HELLO_ACK in `out`; an IPC PUSH's
  // slices read into `incoming`, or false when it was refused (an ERROR to
  // the worker naming it, counted as a bad message, nothing applied).
  void AnswerGpuIpc(const pstrain::Header& hello, std::vector<Outgoing>& out);
  bool ReadIpcPush(const transport::InMessage& message, Incoming& incoming, TimePoint now);
  // R pushed once (server/factor_forward.hpp; shard_loop_forward.cpp): a
  // factor PUSH without R (acknowledged at once) or a forwarded FACTOR_RIGHT;
  // the push they complete goes on as a complete factor push.
  void ReceiveForwarding(transport::InMessage message, TimePoint now);
  void Log(const std::string& line) const;

  ShardState shard_;
  ShardLoopOptions options_;
  transport::Context* context_ = nullptr;  // not owned; outlives the service
  DropLog drops_;
  std::unique_ptr<transport::Channel> router_;
  std::unique_ptr<transport::Channel> coordinator_;  // shards > 0 with a coordinator
  std::unique_ptr<PullReplyOrder> pull_order_;       // options_.pull_window_bytes > 0
  std::vector<transport::Channel*> channels_;        // router_, then coordinator_
  FactorArrival factors_;                            // a push of sufficient factors, rebuilt
  ForwardedRights rights_;                           // pushes without R and forwarded R's
  std::unique_ptr<GpuIpcReader> gpu_ipc_;            // GPU IPC pushes' regions, by worker
  std::map<std::string, bool> server_peers_;         // server 0: the other shards' routing ids
  transport::PeerLiveness liveness_;                 // keyed "worker R"
  std::vector<std::string> worker_names_;            // "worker R" at index R
  std::map<std::string, TimePoint> reported_;        // reported silent: last heard then
  std::atomic<bool> stop_{false};
  static_assert(std::atomic<bool>::is_always_lock_free, "Stop() must be async-signal-safe");
};

}  // namespace pstrain::server

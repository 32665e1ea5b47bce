#include "worker/ps/ps_client.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/ps/factor_relay.hpp"
#include "common/ps/sufficient_factors.hpp"
#include "common/transport/curve.hpp"
#include "common/transport/validate.hpp"
#include "worker/ps/factor_broadcast.hpp"

namespace pstrain {

using transport::InMessage;
using transport::OutMessage;
using transport::Payload;
using Clock = std::chrono::steady_clock;

namespace {

// Send's waits between tries of a retryable failure: doubling, capped.
constexpr std::chrono::milliseconds kFirstRetryWait{50};
constexpr std::chrono::milliseconds kLastRetryWait{1000};

// The DEALER options for shard `k` (CURVE when options.keys is set).
Result<transport::SocketOptions> DealerOptions(const PsClientOptions& options,
                                               transport::SocketOptions base, size_t k) {
  if (options.keys.empty()) return base;
  PSTRAIN_ASSIGN_OR_RETURN(
      transport::KeyPair own,
      transport::ReadKeyPair(options.keys, transport::KeyFileName(options.role, options.rank)));
  PSTRAIN_ASSIGN_OR_RETURN(
      base.curve_server_key,
      transport::ReadPublicKey(options.keys,
                               transport::KeyFileName(pstrain::SERVER, static_cast<int>(k))));
  base.curve_public_key = own.public_key;
  base.curve_secret_key = own.secret_key;
  return base;
}

}  // namespace

std::string SecondsText(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + " s";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(ms.count()) / 1000);
  return text;
}

// Sends HEARTBEAT to every shard that was sent nothing for the interval, from
// a thread of its own on DEALERs of its own (a socket serves one thread). The
// client's thread records its sends in last_sent; stale heartbeats are
// dropped, never queued (a small high-water mark, no send wait).
class PsClient::Heartbeats {
 public:
  static Result<std::unique_ptr<Heartbeats>> Start(transport::Context& context,
                                                   const PsClientOptions& options,
                                                   transport::Origin origin) {
    std::unique_ptr<Heartbeats> h(new Heartbeats(options.servers.size()));
    h->header_ = transport::NewHeader(origin, pstrain::HEARTBEAT);
    h->interval_ = options.heartbeat_interval;
    transport::SocketOptions socket_options;
    socket_options.identity = "worker-" + std::to_string(options.rank) + "-heartbeat";
    socket_options.send_hwm = 2;
    socket_options.send_timeout_ms = 0;
    for (size_t k = 0; k < options.servers.size(); ++k) {
      PSTRAIN_ASSIGN_OR_RETURN(auto dealer_options, DealerOptions(options, socket_options, k));
      PSTRAIN_ASSIGN_OR_RETURN(
          auto channel, transport::ConnectDealer(context, options.servers[k], dealer_options));
      h->channels_.push_back(std::move(channel));
    }
    h->thread_ = std::thread([raw = h.get()] { raw->Loop(); });
    return h;
  }

  ~Heartbeats() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  // The client's thread sent shard k a message.
  void Sent(size_t k) { last_sent_[k].store(Now(), std::memory_order_relaxed); }

 private:
  explicit Heartbeats(size_t shards) : last_sent_(shards) {
    for (auto& t : last_sent_) t.store(Now());
  }
  static int64_t Now() { return Clock::now().time_since_epoch().count(); }

  void Loop() {
    const int64_t interval = std::chrono::duration_cast<Clock::duration>(interval_).count();
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, interval_ / 4, [this] { return stop_; })) {
      for (size_t k = 0; k < channels_.size(); ++k) {
        const int64_t now = Now();
        if (now - last_sent_[k].load(std::memory_order_relaxed) < interval) continue;
        // A full queue (the server is gone or slow) drops this one: the next
        // interval sends another.
        (void)channels_[k]->Send("", OutMessage{header_, {}});
        last_sent_[k].store(now, std::memory_order_relaxed);
      }
    }
  }

  pstrain::Header header_;
  std::chrono::milliseconds interval_{0};
  std::vector<std::unique_ptr<transport::Channel>> channels_;  // used by thread_ only
  std::vector<std::atomic<int64_t>> last_sent_;                // per shard, steady_clock ticks
  std::mutex mutex_;                                           // guards stop_
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// Counts the pushes whose payloads ZeroMQ holds straight from the blobs'
// diffs. Track() gives the owner of one push's payloads; ZeroMQ drops its
// references (on its I/O thread) once the bytes are written to the socket.
// The count lives in a shared state, so a reference dropped after the
// client is gone touches nothing freed.
class PsClient::SendTracker {
 public:
  SendTracker() : state_(std::make_shared<State>()) {}
  ~SendTracker() {
    // The sockets are closed (linger 0 drops what was queued): wait briefly
    // for ZeroMQ to let go before the caller may free the blobs.
    (void)WaitIdle(std::chrono::milliseconds(2000));
  }

  std::shared_ptr<const void> Track() {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      ++state_->pending;
    }
    return std::shared_ptr<const void>(state_.get(), [state = state_](const void*) {
      {
        std::lock_guard<std::mutex> lock(state->mutex);
        --state->pending;
      }
      state->idle.notify_all();
    });
  }

  // True once nothing is held (false after `timeout`).
  bool WaitIdle(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(state_->mutex);
    return state_->idle.wait_for(lock, timeout, [this] { return state_->pending == 0; });
  }

 private:
  struct State {
    std::mutex mutex;  // guards pending
    std::condition_variable idle;
    int64_t pending = 0;
  };
  std::shared_ptr<State> state_;
};

Result<std::unique_ptr<PsClient>> PsClient::Connect(transport::Context& context,
                                                    const PsClientOptions& options,
                                                    std::vector<PsParam> params) {
  if (options.servers.empty()) return Status::InvalidArgument("no parameter servers given");
  std::unique_ptr<PsClient> client(new PsClient());
  client->options_ = options;
  client->params_ = std::move(params);
  std::vector<int64_t> sizes;
  for (const auto& p : client->params_) sizes.push_back(p.blob->count());
  PSTRAIN_ASSIGN_OR_RETURN(
      client->placement_,
      KeyPlacement::Create(sizes, static_cast<int>(options.servers.size()), options.chunk_bytes));
  client->sends_ = std::make_unique<SendTracker>();
  // One DEALER per shard named `identity`, owned by `owned`, in channel_ptrs_ too.
  const std::string worker =
      (options.role == pstrain::WORKER ? "worker-" : "control-") + std::to_string(options.rank);
  auto connect = [&](const std::string& identity,
                     std::vector<std::unique_ptr<transport::Channel>>* owned) -> Status {
    transport::SocketOptions socket_options;
    socket_options.identity = identity;
    socket_options.shared_memory_bytes = static_cast<size_t>(options.shared_memory_mb) << 20;
    for (size_t k = 0; k < options.servers.size(); ++k) {
      // Shard k's connection on I/O thread k mod io_threads: the shards'
      // bytes spread over the context's I/O threads (transport.io_threads).
      socket_options.io_thread = static_cast<int>(k % static_cast<size_t>(context.io_threads()));
      PSTRAIN_ASSIGN_OR_RETURN(auto dealer_options, DealerOptions(options, socket_options, k));
      PSTRAIN_ASSIGN_OR_RETURN(
          auto channel, transport::ConnectDealer(context, options.servers[k], dealer_options));
      if (options.wrap_channel) channel = options.wrap_channel(std::move(channel));
      client->channel_ptrs_.push_back(channel.get());
      owned->push_back(std::move(channel));
    }
    return Status::Ok();
  };
  PSTRAIN_RETURN_IF_ERROR(connect(worker, &client->channels_));
  // The pull connections (channel_ptrs_[S + k]): a pull request travels
  // beside the push parts instead of behind them (see Pull).
  PSTRAIN_RETURN_IF_ERROR(connect(worker + "-pull", &client->pull_channels_));
  for (size_t k = 0; k < options.servers.size(); ++k) {
    client->zero_copy_.push_back(options.servers[k].rfind("inproc://", 0) != 0);
    client->shard_has_chunks_.push_back(!client->placement_.shard_chunks(k).empty());
  }
  client->chunk_push_clock_.assign(client->placement_.chunks().size(), -1);
  client->shard_push_clock_.assign(options.servers.size(), -1);
  client->shard_pushed_.assign(options.servers.size(), 0);
  client->in_flight_.assign(options.servers.size(), 0);
  if (options.heartbeat_interval.count() > 0 && options.role == pstrain::WORKER) {
    PSTRAIN_ASSIGN_OR_RETURN(client->heartbeats_,
                             Heartbeats::Start(context, options, client->origin()));
  }
  return client;
}

PsClient::~PsClient() = default;

std::string PsClient::ServerName(size_t shard) const {
  return "server " + std::to_string(shard) + " (" + options_.servers[shard] + ")";
}

Status PsClient::Send(int shard, OutMessage message, bool pull_connection) {
  int64_t bytes = static_cast<int64_t>(message.header.ByteSizeLong());
  for (const auto& p : message.payloads) bytes += static_cast<int64_t>(p.bytes());
  auto& channel = pull_connection ? pull_channels_[shard] : channels_[shard];
  const auto start = Clock::now();
  auto wait = kFirstRetryWait;
  for (int tries = 1;; ++tries) {
    // A copy per try shares the payloads (no bytes are copied).
    Status s = channel->Send("", message);
    if (s.ok()) break;
    const bool in_time = Clock::now() - start + wait <= options_.timeout;
    if (!s.IsRetryable() || !in_time) {
      std::string context = ServerName(static_cast<size_t>(shard));
      if (tries > 1) context += " (" + std::to_string(tries) + " tries)";
      return s.WithContext(context);
    }
    ++traffic_.send_retries;
    std::this_thread::sleep_for(wait);
    wait = std::min(2 * wait, kLastRetryWait);
  }
  if (heartbeats_) heartbeats_->Sent(static_cast<size_t>(shard));
  traffic_.bytes_sent += bytes;
  return Status::Ok();
}

Status PsClient::Silent(const std::vector<bool>& waiting) const {
  std::string who;
  for (size_t k = 0; k < waiting.size(); ++k) {
    if (waiting[k]) who += (who.empty() ? "" : ", ") + ServerName(k);
  }
  return Status::DeadlineExceeded("no answer from " + who + " for " +
                                  SecondsText(options_.timeout));
}

Result<std::optional<std::pair<int, InMessage>>> PsClient::ReceiveOne(
    std::chrono::milliseconds timeout) {
  PSTRAIN_ASSIGN_OR_RETURN(int ready, transport::PollAny(channel_ptrs_, timeout));
  if (ready < 0) return std::optional<std::pair<int, InMessage>>();
  const size_t k = static_cast<size_t>(ready) % channels_.size();  // the shard
  auto received = channel_ptrs_[static_cast<size_t>(ready)]->Receive(std::chrono::milliseconds(0));
  if (!received.ok()) return received.status().WithContext(ServerName(k));
  if (!received.value().has_value()) return std::optional<std::pair<int, InMessage>>();
  InMessage message = std::move(*received.value());
  traffic_.bytes_received += static_cast<int64_t>(message.bytes());
  transport::ValidationRules rules;
  rules.receiver = pstrain::WORKER;
  rules.job_key = options_.job_key;
  rules.num_servers = static_cast<int>(channels_.size());
  rules.placement = &placement_;
  rules.shard = static_cast<int>(k);
  rules.num_workers = options_.world_size;  // a factor relay's worker count
  if (Status s = transport::Validate(message, rules); !s.ok()) {
    return s.WithContext(ServerName(k) + ": " + transport::Describe(message));
  }
  const auto type = message.header.type();
  if (type == pstrain::ERROR) {
    return Status::FailedPrecondition(ServerName(k) +
                                      " refused a request: " + message.header.text());
  }
  const int shard = static_cast<int>(k);
  if (type == pstrain::PUSH_ACK) {
    in_flight_[k] = std::max(0, in_flight_[k] - 1);
  }
  if (type == pstrain::PULL_REPLY) PSTRAIN_RETURN_IF_ERROR(AcceptPullReply(shard, message));
  if (type == pstrain::FACTOR_RIGHT) PSTRAIN_RETURN_IF_ERROR(OnFactorRight(shard, message));
  return std::optional<std::pair<int, InMessage>>(std::make_pair(shard, std::move(message)));
}

Status PsClient::AwaitFromShards(pstrain::MessageType type, std::vector<bool> waiting,
                                 std::vector<InMessage>* replies) {
  if (replies) replies->resize(channels_.size());
  auto last_heard = Clock::now();
  while (std::find(waiting.begin(), waiting.end(), true) != waiting.end()) {
    PSTRAIN_ASSIGN_OR_RETURN(auto got, ReceiveOne(std::chrono::milliseconds(200)));
    if (!got.has_value()) {
      if (Clock::now() - last_heard > options_.timeout) return Silent(waiting);
      continue;
    }
    last_heard = Clock::now();
    auto& [shard, message] = *got;
    if (message.header.type() == type && waiting[shard]) {
      waiting[shard] = false;
      if (replies) (*replies)[shard] = std::move(message);
    }
  }
  return Status::Ok();
}

Status PsClient::NeedsWorker(const char* what) const {
  if (options_.role == pstrain::WORKER) return Status::Ok();
  return Status::FailedPrecondition(std::string(what) +
                                    " needs a worker's client (this one is a control client)");
}

Status PsClient::Hello(int64_t* clock) {
  PSTRAIN_RETURN_IF_ERROR(NeedsWorker("HELLO"));
  for (size_t k = 0; k < channels_.size(); ++k) {
    OutMessage m{transport::HelloHeader(origin(), options_.world_size, options_.pull_compression),
                 {}};
    if (options_.gpu_ipc_offer) *m.header.mutable_gpu_ipc_offer() = *options_.gpu_ipc_offer;
    PSTRAIN_RETURN_IF_ERROR(Send(static_cast<int>(k), std::move(m)));
  }
  std::vector<InMessage> replies;
  PSTRAIN_RETURN_IF_ERROR(
      AwaitFromShards(pstrain::HELLO_ACK, std::vector<bool>(channels_.size(), true), &replies));
  int64_t smallest = INT64_MAX;
  for (size_t k = 0; k < replies.size(); ++k) {
    auto ack = transport::ReadHelloAck(replies[k].header, options_.pull_compression);
    if (!ack.ok()) return ack.status().WithContext(ServerName(k));
    if (ack->mode != options_.mode) {
      return Status::FailedPrecondition(ServerName(k) + " runs " + ModeName(ack->mode) +
                                        ", this worker " + ModeName(options_.mode));
    }
    if (shard_has_chunks_[k]) smallest = std::min(smallest, ack->clock);
  }
  *clock = smallest == INT64_MAX ? 0 : smallest;
  return ChooseGpuPath(replies);
}

Status PsClient::InitPush() {
  PSTRAIN_RETURN_IF_ERROR(NeedsWorker("INIT_PUSH"));
  std::vector<bool> waiting(channels_.size(), false);
  for (size_t k = 0; k < channels_.size(); ++k) {
    OutMessage m{transport::NewHeader(origin(), pstrain::INIT_PUSH), {}};
    for (const auto& p : params_) {
      pstrain::ParamMeta* meta = m.header.add_params();
      meta->set_name(p.name);
      for (int d : p.blob->shape()) meta->add_shape(d);
      meta->set_lr_mult(p.lr_mult);
      meta->set_decay_mult(p.decay_mult);
    }
    for (uint32_t id : placement_.shard_chunks(static_cast<int>(k))) {
      const Chunk& c = placement_.chunk(id);
      auto values = StagingBuffer(c.length);
      std::memcpy(values->data(), params_[c.param].blob->cpu_data() + c.offset,
                  c.length * sizeof(float));
      transport::AddChunk(m.header, id, static_cast<uint64_t>(c.length));
      m.payloads.push_back(Payload::Slice(values, 0, c.length));
    }
    PSTRAIN_RETURN_IF_ERROR(Send(static_cast<int>(k), std::move(m)));
    waiting[k] = true;
  }
  return AwaitFromShards(pstrain::INIT_ACK, waiting, nullptr);
}

Status PsClient::Pull(int64_t clock) {
  // A control client may pull too: the shards answer it at once with their
  // current weights (ShardState::OnControlPull), whatever `clock` says.
  if (pull_outstanding_) return Status::FailedPrecondition("a pull is already outstanding");
  pull_arrived_.assign(placement_.chunks().size(), 0);
  pull_missing_.assign(channels_.size(), 0);
  pull_version_.assign(channels_.size(), INT64_MIN);
  pull_files_.assign(channels_.size(), "");
  if (factor_broadcast_ != nullptr) factor_broadcast_->BeginPull(clock);
  for (size_t k = 0; k < channels_.size(); ++k) {
    if (!shard_has_chunks_[k]) continue;
    const int64_t chunks =
        static_cast<int64_t>(placement_.shard_chunks(static_cast<int>(k)).size());
    pull_missing_[k] = chunks;
    OutMessage m{transport::PullHeader(origin(), clock), {}};
    if (factor_broadcast_ != nullptr) factor_broadcast_->AddToPull(&m.header);
    // On the pull connection, the request reaches the shard while this
    // worker's last push may still be on the wire (on the other connection),
    // and the reply's parts travel back as that push's parts are applied.
    // That keeps the answer the same as on the push connection (behind the
    // push) only where the shard can tell what to wait for:
    //   bsp: always (a chunk of iteration t exists once every worker's
    //        gradient of it is applied, this one's included);
    //   ssp/asp: when this worker pushed every chunk of the shard for
    //        iteration clock - 1 (after_push): each chunk waits for its part
    //        of that push. Otherwise (nothing or part of the shard pushed for
    //        clock - 1) the request goes behind the pushes as before.
    bool beside = options_.mode == ConsistencyMode::kBsp && options_.role == pstrain::WORKER;
    if (options_.role == pstrain::WORKER && !beside && clock > 0 &&
        shard_push_clock_[k] == clock - 1 && shard_pushed_[k] == chunks) {
      m.header.set_after_push(clock - 1);
      beside = true;
    }
    PSTRAIN_RETURN_IF_ERROR(Send(static_cast<int>(k), std::move(m), beside));
  }
  pull_clock_ = clock;
  pull_outstanding_ = true;
  return Status::Ok();
}

Status PsClient::AcceptPullReply(int shard, const InMessage& reply) {
  const std::string server = ServerName(static_cast<size_t>(shard));
  const size_t k = static_cast<size_t>(shard);
  if (!pull_outstanding_ || !shard_has_chunks_[k]) {
    return Status::InvalidArgument(server + " sent a pull reply that no pull asked for");
  }
  if (reply.header.clock() != pull_clock_) {
    return Status::InvalidArgument(server + " answered a pull for iteration " +
                                   std::to_string(reply.header.clock()) + ", expected " +
                                   std::to_string(pull_clock_));
  }
  const pstrain::DataType dtype = reply.header.dtype();
  if (dtype != options_.pull_compression) {
    return Status::InvalidArgument(server + " sent a " + pstrain::DataType_Name(dtype) +
                                   " pull reply, this worker pulls in " +
                                   pstrain::DataType_Name(options_.pull_compression));
  }
  for (int i = 0; i < reply.header.chunks_size(); ++i) {
    const uint32_t id = reply.header.chunks(i).id();
    if (pull_arrived_[id]) {
      return Status::InvalidArgument(server + " sent chunk " + std::to_string(id) +
                                     " twice for one pull");
    }
    pull_arrived_[id] = 1;
    const Chunk& c = placement_.chunk(id);
    float* data = params_[c.param].blob->mutable_cpu_data() + c.offset;
    if (dtype == pstrain::FLOAT32) {
      std::memcpy(data, reply.payload(i), c.length * sizeof(float));
    } else {  // Validate checked the encoding's size
      transport::Decode(dtype, reply.payload(i), reply.payload_bytes(i),
                        static_cast<uint64_t>(c.length), data);
    }
  }
  pull_missing_[k] -= reply.header.chunks_size();
  if (reply.header.relay_size() > 0 || reply.header.history_chunks_size() > 0) {
    if (factor_broadcast_ == nullptr) {
      return Status::InvalidArgument(server + " sent factors or history no pull asked for");
    }
    PSTRAIN_RETURN_IF_ERROR(factor_broadcast_->Accept(shard, server, reply));
    for (uint32_t id : reply.header.relayed_chunks()) {  // answered by their factors
      if (pull_arrived_[id]) continue;  // also sent as values (a verification)
      pull_arrived_[id] = 1;
      --pull_missing_[k];
    }
  }
  pull_version_[k] = std::max(pull_version_[k], reply.header.version());
  if (!reply.header.text().empty()) pull_files_[k] = reply.header.text();
  return Status::Ok();
}

Status PsClient::WaitPull(int64_t* version, std::vector<std::string>* checkpoint_files) {
  if (!pull_outstanding_) return Status::FailedPrecondition("WaitPull without a Pull");
  const auto start = Clock::now();
  auto last_heard = start;
  auto missing = [&] {
    return std::any_of(pull_missing_.begin(), pull_missing_.end(), [](int64_t n) { return n > 0; });
  };
  while (missing()) {
    PSTRAIN_ASSIGN_OR_RETURN(auto got, ReceiveOne(std::chrono::milliseconds(200)));
    if (got.has_value()) {
      last_heard = Clock::now();
      continue;
    }
    if (Clock::now() - last_heard > options_.timeout) {
      std::vector<bool> waiting;
      for (int64_t missing : pull_missing_) waiting.push_back(missing > 0);
      return Silent(waiting);
    }
  }
  pull_outstanding_ = false;
  if (factor_broadcast_ != nullptr) PSTRAIN_RETURN_IF_ERROR(factor_broadcast_->Finish());
  PSTRAIN_RETURN_IF_ERROR(WaitDiffsReleased());  // the caller writes the diffs next
  int64_t smallest = INT64_MAX;
  for (size_t k = 0; k < pull_version_.size(); ++k) {
    if (shard_has_chunks_[k]) smallest = std::min(smallest, pull_version_[k]);
  }
  *version = smallest == INT64_MAX ? 0 : smallest;
  if (checkpoint_files) {
    checkpoint_files->clear();
    for (const std::string& file : pull_files_) {  // in shard order
      if (!file.empty()) checkpoint_files->push_back(file);
    }
  }
  traffic_.pull_wait_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  return Status::Ok();
}

Status PsClient::WaitParams(const std::vector<int>& param_ids) {
  if (!pull_outstanding_) return Status::FailedPrecondition("WaitParams without a Pull");
  // The shards that still owe a chunk of `param_ids` (none: all arrived).
  auto owing = [&] {
    std::vector<bool> waiting(channels_.size(), false);
    for (int p : param_ids) {
      for (uint32_t id : placement_.param_chunks(p)) {
        if (!pull_arrived_[id]) waiting[static_cast<size_t>(placement_.chunk(id).shard)] = true;
      }
    }
    return waiting;
  };
  auto any = [](const std::vector<bool>& v) { return std::find(v.begin(), v.end(), true) != v.end(); };
  const auto start = Clock::now();
  auto last_heard = start;
  for (std::vector<bool> waiting = owing(); any(waiting); waiting = owing()) {
    PSTRAIN_ASSIGN_OR_RETURN(auto got, ReceiveOne(std::chrono::milliseconds(200)));
    if (got.has_value()) {
      last_heard = Clock::now();
    } else if (Clock::now() - last_heard > options_.timeout) {
      return Silent(waiting);
    }
  }
  traffic_.pull_wait_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  return Status::Ok();
}

Status PsClient::ReleaseDiffs() {
  const auto start = Clock::now();
  Status s = WaitDiffsReleased();
  traffic_.pull_wait_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  return s;
}

Status PsClient::WaitDiffsReleased() {
  if (sends_->WaitIdle(options_.timeout)) return Status::Ok();
  return Status::DeadlineExceeded("pushed gradients still not sent after " +
                                  SecondsText(options_.timeout));
}

std::shared_ptr<std::vector<float>> PsClient::StagingBuffer(size_t count) {
  for (auto& buffer : pool_) {
    if (buffer.use_count() == 1 && buffer->size() >= count) return buffer;
  }
  pool_.push_back(std::make_shared<std::vector<float>>(count));
  return pool_.back();
}

Status PsClient::Push(const std::vector<int>& param_ids, int64_t clock, double sum_squares) {
  return Push(param_ids, clock, sum_squares, {});
}

Status PsClient::Push(const std::vector<int>& param_ids, int64_t clock, double sum_squares,
                      const std::vector<const float*>& diffs) {
  PSTRAIN_CHECK(diffs.empty() || diffs.size() == param_ids.size());
  PSTRAIN_RETURN_IF_ERROR(NeedsWorker("PUSH"));
  std::vector<OutMessage> messages(channels_.size());
  const bool compressed = options_.compression != pstrain::FLOAT32;
  std::shared_ptr<const void> diffs_owner;  // one owner for every payload sent from the diffs
  for (size_t i = 0; i < param_ids.size(); ++i) {
    const int p = param_ids[i];
    const float* diff = diffs.empty() ? params_[p].blob->cpu_diff() : diffs[i];
    for (uint32_t id : placement_.param_chunks(p)) {
      const Chunk& c = placement_.chunk(id);
      transport::AddChunk(messages[c.shard].header, id, static_cast<uint64_t>(c.length));
      if (compressed) {
        if (encoders_.size() <= id) encoders_.resize(placement_.chunks().size());
        if (!encoders_[id]) {
          encoders_[id] = std::make_unique<transport::GradientEncoder>(
              options_.compression, static_cast<size_t>(c.length), options_.topk_ratio,
              options_.error_feedback);
        }
        encoders_[id]->Encode(diff + c.offset, &encoded_);
        auto words = StagingBuffer(encoded_.size());
        std::memcpy(words->data(), encoded_.data(), encoded_.size() * sizeof(float));
        messages[c.shard].payloads.push_back(Payload::Slice(words, 0, encoded_.size()));
        continue;
      }
      if (diffs.empty() && zero_copy_[c.shard]) {
        if (!diffs_owner) diffs_owner = sends_->Track();
        messages[c.shard].payloads.push_back(
            Payload{diffs_owner, diff + c.offset, static_cast<size_t>(c.length)});
        continue;
      }
      auto values = StagingBuffer(c.length);
      std::memcpy(values->data(), diff + c.offset, c.length * sizeof(float));
      messages[c.shard].payloads.push_back(Payload::Slice(values, 0, c.length));
    }
  }
  diffs_owner.reset();  // ZeroMQ's frames hold the rest
  for (size_t k = 0; k < messages.size(); ++k) {
    if (messages[k].payloads.empty()) continue;
    pstrain::Header header = transport::PushHeader(origin(), clock, sum_squares);
    if (compressed) header.set_dtype(options_.compression);
    std::vector<uint32_t> ids;
    for (const auto& c : messages[k].header.chunks()) ids.push_back(c.id());
    PSTRAIN_RETURN_IF_ERROR(SendPush(static_cast<int>(k), header, std::move(messages[k])));
    NotePushed(k, clock, ids);
  }
  return Status::Ok();
}

void PsClient::NotePushed(size_t k, int64_t clock, const std::vector<uint32_t>& ids) {
  // The chunks of this shard pushed for `clock` (Pull's after_push).
  if (shard_push_clock_[k] != clock) {
    shard_push_clock_[k] = clock;
    shard_pushed_[k] = 0;
  }
  for (uint32_t id : ids) {
    if (chunk_push_clock_[id] == clock) continue;
    chunk_push_clock_[id] = clock;
    ++shard_pushed_[k];
  }
}

Status PsClient::PushFactors(int param_id, int64_t clock, const GradientFactors& factors,
                             bool relay) {
  PSTRAIN_RETURN_IF_ERROR(NeedsWorker("PUSH"));
  const Blob& blob = *params_[static_cast<size_t>(param_id)].blob;
  const int64_t rows = blob.shape(0);
  const int64_t cols = blob.count() / rows;
  const int64_t samples = factors.samples;
  // 16-bit pushes send the factors in 16 bits too (FactorDtype).
  const pstrain::DataType dtype = FactorDtype(options_.compression);
  // A frame of `n` values: a float32 copy, or their 16-bit encoding.
  auto frame = [&](const float* values, size_t n) {
    if (dtype == pstrain::FLOAT32) {
      auto copy = StagingBuffer(n);
      std::memcpy(copy->data(), values, n * sizeof(float));
      return Payload::Slice(copy, 0, n);
    }
    EncodeFactors(dtype, values, n, &encoded_);
    auto words = StagingBuffer(encoded_.size());
    std::memcpy(words->data(), encoded_.data(), encoded_.size() * sizeof(float));
    return Payload::Slice(words, 0, encoded_.size());
  };
  // The param's chunks by shard, ascending.
  std::vector<std::vector<uint32_t>> by_shard(channels_.size());
  for (uint32_t id : placement_.param_chunks(param_id)) {
    by_shard[static_cast<size_t>(placement_.chunk(id).shard)].push_back(id);
  }
  for (size_t k = 0; k < by_shard.size(); ++k) {
    const std::vector<uint32_t>& ids = by_shard[k];
    if (ids.empty()) continue;
    const WeightRows span = SpanRows(placement_, ids, cols);
    OutMessage m{transport::PushHeader(origin(), clock, -1.0), {}};
    pstrain::FactorShape* shape = m.header.mutable_factors();
    shape->set_samples(static_cast<uint32_t>(samples));
    shape->set_row_begin(static_cast<uint32_t>(span.begin));
    shape->set_row_end(static_cast<uint32_t>(span.end));
    shape->set_cols(static_cast<uint32_t>(cols));
    if (relay) shape->set_relay(true);
    // R pushed once: to the holder; the others get it forwarded.
    const bool forwarded = relay && options_.factor_right_holder &&
                           RelayHolder(placement_, param_id, options_.rank) != static_cast<int>(k);
    if (forwarded) shape->set_right_forwarded(true);
    if (dtype != pstrain::FLOAT32) m.header.set_dtype(dtype);
    for (uint32_t id : ids) {
      transport::AddChunk(m.header, id, static_cast<uint64_t>(placement_.chunk(id).length));
    }
    // L's columns [span.begin, span.end), samples x width.
    const size_t width = static_cast<size_t>(span.count());
    const size_t left_count = static_cast<size_t>(samples) * width;
    const float* left = factors.left;
    if (width != static_cast<size_t>(rows)) {
      factor_columns_.resize(left_count);
      for (int64_t s = 0; s < samples; ++s) {
        std::memcpy(factor_columns_.data() + s * width, factors.left + s * rows + span.begin,
                    width * sizeof(float));
      }
      left = factor_columns_.data();
    }
    m.payloads.push_back(frame(left, left_count));
    if (!forwarded) m.payloads.push_back(frame(factors.right, static_cast<size_t>(samples * cols)));
    PSTRAIN_RETURN_IF_ERROR(SendPushPart(static_cast<int>(k), std::move(m)));
    NotePushed(k, clock, ids);
  }
  return Status::Ok();
}

Status PsClient::SendPush(int shard, const pstrain::Header& header, OutMessage message) {
  pstrain::Header whole = header;
  *whole.mutable_chunks() = std::move(*message.header.mutable_chunks());
  for (OutMessage& piece :
       transport::SplitMessage(OutMessage{std::move(whole), std::move(message.payloads)})) {
    PSTRAIN_RETURN_IF_ERROR(SendPushPart(shard, std::move(piece)));
  }
  return Status::Ok();
}

Status PsClient::SendPushPart(int shard, OutMessage message) {
  const size_t k = static_cast<size_t>(shard);
  const auto start = Clock::now();
  while (in_flight_[k] >= options_.max_pushes_in_flight) {
    PSTRAIN_ASSIGN_OR_RETURN(auto got, ReceiveOne(std::chrono::milliseconds(200)));
    if (!got.has_value() && Clock::now() - start > options_.timeout) {
      return Status::DeadlineExceeded(ServerName(k) + " acknowledged no push for " +
                                      SecondsText(options_.timeout));
    }
    // Pull replies that arrive meanwhile are copied in by ReceiveOne.
  }
  traffic_.push_wait_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  PSTRAIN_RETURN_IF_ERROR(Send(shard, std::move(message)));
  ++in_flight_[k];
  return Status::Ok();
}

Status PsClient::Flush() {
  const auto start = Clock::now();
  while (std::any_of(in_flight_.begin(), in_flight_.end(), [](int n) { return n > 0; })) {
    PSTRAIN_ASSIGN_OR_RETURN(auto got, ReceiveOne(std::chrono::milliseconds(200)));
    if (!got.has_value() && Clock::now() - start > options_.timeout) {
      std::vector<bool> waiting;
      for (int n : in_flight_) waiting.push_back(n > 0);
      return Silent(waiting).WithContext("waiting for push acknowledgements");
    }
  }
  return WaitDiffsReleased();
}

}  // namespace pstrain

#include "server/shard_loop.hpp"

#include <cmath>
#include <cstdio>
#include <utility>

#include "common/transport/curve.hpp"
#include "common/transport/validate.hpp"

namespace pstrain::server {
namespace {

using Clock = std::chrono::steady_clock;

// With pull_window_bytes: the ROUTER's kernel send buffer per connection.
constexpr int kPullSendBufferBytes = 256 << 10;

std::string Seconds(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

ShardLoop::ShardLoop(ShardState shard, ShardLoopOptions options)
    : shard_(std::move(shard)),
      options_(std::move(options)),
      drops_(options_.log, options_.drop_log_lines, options_.drop_log_interval) {
  for (int w = 0; w < shard_.config().num_workers; ++w) {
    worker_names_.push_back("worker " + std::to_string(w));
  }
}

ShardLoop::~ShardLoop() = default;

Result<std::unique_ptr<ShardLoop>> ShardLoop::Create(transport::Context& context, ShardState shard,
                                                     ShardLoopOptions options) {
  std::unique_ptr<ShardLoop> service(new ShardLoop(std::move(shard), std::move(options)));
  service->shard_.log = service->options_.log;
  const ShardConfig& config = service->shard_.config();
  transport::ShardGpuFacts facts;
  facts.shard = config.shard;
  facts.host_id = transport::LocalHostId();
  facts.device = config.device;
  facts.mode = config.mode;
  facts.backup_workers = config.methods.backup_workers;
  service->gpu_ipc_ = std::make_unique<GpuIpcReader>(std::move(facts));
  service->shard_.drop_log = [raw = service.get()](const std::string& line) {
    raw->drops_.Report(line, Clock::now());
  };
  service->context_ = &context;
  if (service->options_.pull_window_bytes > 0) {
    service->pull_order_ = std::make_unique<PullReplyOrder>(service->options_.pull_window_bytes,
                                                            transport::kMessagePartBytes);
  }
  const int k = service->shard_.config().shard;
  const std::string& keys = service->options_.keys;
  transport::KeyPair own;
  if (!keys.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(auto admitted, transport::ReadAdmittedKeys(keys));
    service->Log("CURVE on: admitting the " + std::to_string(admitted.size()) + " public keys in " +
                 keys);
    PSTRAIN_RETURN_IF_ERROR(context.AdmitKeys(std::move(admitted)));
    PSTRAIN_ASSIGN_OR_RETURN(
        own, transport::ReadKeyPair(keys, transport::KeyFileName(pstrain::SERVER, k)));
  }
  transport::SocketOptions router_options;
  router_options.linger_ms = 2000;  // deliver the last acknowledgements at exit
  if (service->options_.pull_window_bytes > 0) {
    // The kernel's buffer would otherwise hold up to 4 MB a connection beyond
    // the window (tcp autotuning), in arrival order.
    router_options.send_buffer_bytes = kPullSendBufferBytes;
  }
  router_options.curve_secret_key = own.secret_key;
  router_options.shared_memory_bytes = static_cast<size_t>(service->options_.shared_memory_mb)
                                       << 20;
  PSTRAIN_ASSIGN_OR_RETURN(service->router_,
                           transport::BindRouter(context, service->options_.bind, router_options));
  service->channels_.push_back(service->router_.get());
  if (k > 0 && !service->options_.coordinator.empty()) {
    transport::SocketOptions dealer_options;
    dealer_options.identity = "server-" + std::to_string(k);
    dealer_options.shared_memory_bytes = router_options.shared_memory_bytes;  // both ends agree
    if (!keys.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(dealer_options.curve_server_key,
                               transport::ReadPublicKey(keys, "server-0"));
      dealer_options.curve_public_key = own.public_key;
      dealer_options.curve_secret_key = own.secret_key;
    }
    PSTRAIN_ASSIGN_OR_RETURN(
        service->coordinator_,
        transport::ConnectDealer(context, service->options_.coordinator, dealer_options));
    service->channels_.push_back(service->coordinator_.get());
  }
  return service;
}

const std::string& ShardLoop::endpoint() const { return router_->endpoint(); }

transport::RingTraffic ShardLoop::ring_traffic() const { return router_->ring_traffic(); }

Result<ShardLoop::Ending> ShardLoop::Run() {
  Result<Ending> ended = Serve();
  SendOrderedPulls(/*all=*/true);  // linger delivers them
  CountRefusals(Clock::now());
  drops_.Flush(Clock::now(), /*force=*/true);
  return ended;
}

Result<ShardLoop::Ending> ShardLoop::Serve() {
  auto last_message = Clock::now();
  auto last_tick = last_message;
  while (!shard_.done()) {
    if (stop_.load(std::memory_order_relaxed)) return Ending::kStopped;
    // While replies wait for the window, look again every millisecond (ZeroMQ
    // lets go of sent bytes on its own thread, which wakes no poll).
    const bool held = pull_order_ && !pull_order_->empty();
    PSTRAIN_ASSIGN_OR_RETURN(
        int ready,
        transport::PollAny(channels_, held ? std::chrono::milliseconds(1) : options_.poll));
    if (held) SendOrderedPulls(/*all=*/false);
    const auto now = Clock::now();
    if (now - last_tick >= options_.tick) {
      SendAll(shard_.Tick(now));
      CheckLiveness(now);
      CountRefusals(now);
      last_tick = now;
    }
    if (ready < 0) {
      if (options_.idle_exit.count() > 0 && now - last_message > options_.idle_exit) {
        return Status::DeadlineExceeded("no message for " + Seconds(now - last_message) +
                                        " s; exiting");
      }
      continue;
    }
    last_message = now;
    Receive(channels_[static_cast<size_t>(ready)], now);
    if (!shard_.failure().ok()) return shard_.failure();
  }
  return Ending::kShutdown;
}

void ShardLoop::Receive(transport::Channel* channel, TimePoint now) {
  auto received = channel->Receive(std::chrono::milliseconds(0));
  if (!received.ok()) {
    shard_.CountBadMessage();
    drops_.Report("dropped a message: " + received.status().message(), now);
    return;
  }
  if (!received.value().has_value()) return;
  transport::InMessage message = std::move(*received.value());
  transport::ValidationRules rules = shard_.RulesFor(message.header);
  rules.authenticated = !options_.keys.empty();
  if (Status s = transport::Validate(message, rules); !s.ok()) {
    shard_.CountBadMessage();
    drops_.Report("dropped " + transport::Describe(message) + ": " + s.message(), now);
    return;
  }
  Heard(message.header, now);
  if (message.header.role() == pstrain::SERVER && channel == router_.get()) {
    server_peers_[message.peer] = true;
  }
  Incoming incoming{message.peer, message.header, {}, {}};
  if (message.header.type() == pstrain::HELLO) {
    std::vector<Outgoing> out = shard_.Handle(incoming, now);
    AnswerGpuIpc(message.header, out);
    SendAll(std::move(out));
    return;
  }
  if (message.header.ipc_offsets_size() > 0) {  // the values are in the worker's GPU region
    if (ReadIpcPush(message, incoming, now)) SendAll(shard_.Handle(incoming, now));
    return;
  }
  if (message.header.type() == pstrain::FACTOR_RIGHT ||
      (message.header.has_factors() && message.header.factors().right_forwarded())) {
    ReceiveForwarding(std::move(message), now);  // R pushed once: paired first
    return;
  }
  if (message.header.has_factors()) {  // sufficient factors: rebuilt here, once
    const KeyPlacement* placement = shard_.placement();
    if (placement == nullptr) {
      shard_.CountBadMessage();
      drops_.Report("dropped " + transport::Describe(message) +
                        ": sufficient factors before the init push",
                    now);
      return;
    }
    // 16-bit frames decoded first; the rows rebuilt on the apply threads
    factors_.Prepare(message, *placement, &incoming, shard_.apply_threads());
    SendAll(shard_.Handle(incoming, now));
    return;
  }
  TakePayloads(message, &incoming);  // zero copy (Validate has checked each encoding)
  SendAll(shard_.Handle(incoming, now));
}

void ShardLoop::SendAll(std::vector<Outgoing> outgoing) {
  bool ordered = false;
  for (auto& o : outgoing) {
    if (o.header.type() == pstrain::STATS && o.header.has_stats()) {
      o.header.mutable_stats()->set_gpu_ipc_pushes(gpu_ipc_->pushes_read());
    }
    // A reply with history or relayed factors (frames besides one per chunk,
    // docs/wire-protocol.md "Factor relay") cannot be cut into its chunks: it
    // goes whole, at once.
    const bool per_chunk =
        transport::PayloadFrames(o.header) == static_cast<size_t>(o.header.chunks_size());
    if (pull_order_ && o.to == Outgoing::To::kPeer && o.header.type() == pstrain::PULL_REPLY &&
        per_chunk) {
      pull_order_->Add(std::move(o));
      ordered = true;
      continue;
    }
    transport::OutMessage whole{std::move(o.header), {}};
    for (const auto& p : o.payloads) whole.payloads.push_back(transport::Payload::Of(p));
    // A PULL_REPLY of more than kMessagePartBytes goes as several PULL_REPLYs
    // (same fields, consecutive chunks), so the worker copies part k while
    // part k+1 travels. The worker accepts a pull's chunks in any number of replies.
    std::vector<transport::OutMessage> parts;
    if (whole.header.type() == pstrain::PULL_REPLY) {
      parts = transport::SplitMessage(std::move(whole));
    } else {
      parts.push_back(std::move(whole));
    }
    for (transport::OutMessage& m : parts) Send(o, std::move(m));
  }
  if (ordered) SendOrderedPulls(/*all=*/false);
}

void ShardLoop::SendOrderedPulls(bool all) {
  if (!pull_order_) return;
  for (auto& [peer, m] : all ? pull_order_->TakeAll() : pull_order_->Take()) {
    if (Status s = router_->Send(peer, std::move(m)); !s.ok()) Log("send failed: " + s.message());
  }
}

void ShardLoop::Send(const Outgoing& o, transport::OutMessage m) {
  Status s;
  if (o.to == Outgoing::To::kPeer) {
    s = router_->Send(o.peer, std::move(m));
  } else if (o.to == Outgoing::To::kCoordinator) {
    s = coordinator_ ? coordinator_->Send("", std::move(m))
                     : Status::Error("clipping needs --coordinator on shards > 0");
  } else {
    for (const auto& [peer, unused] : server_peers_) {
      Status one = router_->Send(peer, transport::OutMessage{m.header, m.payloads});
      if (!one.ok()) s = one;
    }
  }
  if (!s.ok()) Log("send failed: " + s.message());
}

void ShardLoop::Heard(const pstrain::Header& header, TimePoint now) {
  if (header.role() != pstrain::WORKER) return;  // validated: 0 <= sender < num_workers
  const std::string& name = worker_names_[static_cast<size_t>(header.sender())];
  if (auto it = reported_.find(name); it != reported_.end()) {
    Log(name + " is heard from again after " + Seconds(now - it->second) + " s of silence");
    reported_.erase(it);
  }
  liveness_.Heard(name, now);
}

std::string SilenceWarning(const ShardLoopOptions::Silence& silence) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", silence.seconds);
  return "warning: worker " + std::to_string(silence.worker) + " (clock " +
         std::to_string(silence.clock) + ") has been silent for " + seconds + " s";
}

void ShardLoop::CheckLiveness(TimePoint now) {
  for (const std::string& name : liveness_.Silent(now, options_.silence_warning)) {
    int w = 0;
    while (worker_names_[static_cast<size_t>(w)] != name) ++w;
    const int64_t clock = shard_.clocks().clock(w);
    if (options_.max_iter > 0 && clock >= options_.max_iter) {
      liveness_.Forget(name);  // done training: silence is expected
      continue;
    }
    if (reported_.count(name) > 0) continue;
    const TimePoint last = liveness_.last_heard(name);
    reported_[name] = last;
    const ShardLoopOptions::Silence silence{
        w, clock, std::round(std::chrono::duration<double>(now - last).count() * 10) / 10};
    if (options_.on_silence) {
      options_.on_silence(silence);
    } else {
      Log(SilenceWarning(silence));
    }
  }
}

void ShardLoop::CountRefusals(TimePoint now) {
  int64_t refused = 0;
  const std::vector<std::string> lines = context_->TakeRefusals(&refused);
  for (const std::string& line : lines) drops_.Report(line, now);
  const int64_t failed = router_->TakeHandshakeFailures();  // peers without CURVE
  shard_.CountRefusedConnections(refused + failed);
  drops_.Count(refused - static_cast<int64_t>(lines.size()), now);
  for (int64_t i = 0; i < failed; ++i) {
    drops_.Report("refused a connection on " + endpoint() +
                      ": its handshake failed (a peer without CURVE, or one using another "
                      "server key)",
                  now);
  }
  drops_.Flush(now);
}

void ShardLoop::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

}  // namespace pstrain::server

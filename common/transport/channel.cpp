#include "common/transport/channel.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>
#include <zmq.hpp>

#include "common/transport/shared_ring.hpp"
#include "common/transport/zap.hpp"

namespace pstrain::transport {

struct Context::Impl {
  explicit Impl(int io_threads) : context(io_threads < 1 ? 1 : io_threads) {}
  zmq::context_t context;           // its I/O threads
  std::unique_ptr<ZapHandler> zap;  // after the context: closed before it terminates
};

Context::Context(int io_threads) : impl_(std::make_unique<Impl>(io_threads)) {}

int Context::io_threads() const {
  return impl_->context.get(zmq::ctxopt::io_threads);
}
Context::~Context() = default;

Status Context::AdmitKeys(std::map<std::string, std::string> admitted) {
  if (impl_->zap) return Status::FailedPrecondition("the keys this context admits are already set");
  PSTRAIN_ASSIGN_OR_RETURN(impl_->zap,
                           ZapHandler::Start(impl_->context.handle(), std::move(admitted)));
  return Status::Ok();
}

std::vector<std::string> Context::TakeRefusals(int64_t* count) {
  *count = 0;
  return impl_->zap ? impl_->zap->TakeRefusals(count) : std::vector<std::string>{};
}

class ContextAccess {
 public:
  static zmq::context_t& Of(Context& context) { return context.impl_->context; }
  static bool Admits(Context& context) { return context.impl_->zap != nullptr; }
};

class FrameAccess {
 public:
  static zmq_msg_t* Of(Frame& frame) { return reinterpret_cast<zmq_msg_t*>(frame.message_); }
};

namespace {

using Clock = std::chrono::steady_clock;

std::string ZmqError(int err) { return zmq_strerror(err); }

// "<what>: <ZeroMQ's text>" with the kind the errno says: a peer gone or not
// reachable is Unavailable, a wait that ran out (a full queue) is
// DeadlineExceeded (both retryable); a terminated context is
// FailedPrecondition, a bad argument InvalidArgument, no memory or file
// descriptors ResourceExhausted, and the rest an IOError.
Status ZmqStatus(int err, const std::string& what) {
  std::string message = what + ": " + ZmqError(err);
  switch (err) {
    case EHOSTUNREACH:
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case ENOTCONN:
    case ENETUNREACH:
    case ENETDOWN:
    case EINTR:
      return Status::Unavailable(std::move(message));
    case EAGAIN:
    case ETIMEDOUT:
      return Status::DeadlineExceeded(std::move(message));
    case ETERM:
    case EFSM:
    case ENOTSUP:
      return Status::FailedPrecondition(std::move(message));
    case EINVAL:
    case EFAULT:
    case EMSGSIZE:
    case EPROTONOSUPPORT:
    case ENOCOMPATPROTO:
    case ENODEV:
      return Status::InvalidArgument(std::move(message));
    case ENOMEM:
    case ENOBUFS:
    case EMFILE:
    case EMTHREAD:
      return Status::ResourceExhausted(std::move(message));
    default:
      return Status::IOError(std::move(message));
  }
}

Status SetOption(zmq::socket_t& socket, int option, const void* value, size_t size,
                 const char* name) {
  if (zmq_setsockopt(socket.handle(), option, value, size) != 0) {
    return ZmqStatus(zmq_errno(), std::string("cannot set ") + name);
  }
  return Status::Ok();
}

Status SetInt(zmq::socket_t& socket, int option, int value, const char* name) {
  return SetOption(socket, option, &value, sizeof(value), name);
}

// Milliseconds left until `deadline`, rounded up; 0 once it has passed.
// Rounded down, a wait of 1 ms was 0 from its first poll (less than a whole
// millisecond is left by then), and zmq_poll(0) does not wait: the shard's
// loop spun while replies waited for their window (ShardLoop::Serve).
long RemainingMs(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  return static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

class ZmqChannel : public Channel {
 public:
  ZmqChannel(zmq::socket_t socket, bool router, std::string endpoint, const SocketOptions& options)
      : socket_(std::move(socket)),
        router_(router),
        endpoint_(std::move(endpoint)),
        send_timeout_ms_(options.send_timeout_ms),
        send_hwm_(options.send_hwm),
        ring_bytes_(options.shared_memory_bytes),
        max_frame_bytes_(options.max_message_bytes) {}
  ~ZmqChannel() override {
    if (monitor_ != nullptr) {
      zmq_socket_monitor(socket_.handle(), nullptr, 0);
      zmq_close(monitor_);
    }
  }

  Status SendFrames(const std::string& peer, std::vector<Frame> frames) override;
  Result<std::optional<InMessage>> Receive(std::chrono::milliseconds timeout) override;
  const std::string& endpoint() const override { return endpoint_; }
  int64_t TakeHandshakeFailures() override;
  RingTraffic ring_traffic() const override { return ring_traffic_; }
  // Watches the socket's failed handshakes (a CURVE ROUTER).
  Status Monitor(zmq::context_t& context);

 private:
  void* poll_handle() override { return socket_.handle(); }
  void PrepareSend(const std::string& peer, std::vector<Frame>* frames) override {
    if (ring_bytes_ > 0) MoveToRing(peer, frames);
  }
  Status SendError(const std::string& peer, int err) const;
  Result<std::optional<InMessage>> ReadMessage(Frame first);
  // Moves the payload frames that are worth it into `peer`'s ring and
  // appends the trailer naming their places.
  void MoveToRing(const std::string& peer, std::vector<Frame>* frames);
  // Puts the trailer's slots back in place of the empty payload frames.
  Status TakeFromRing(InMessage* message, const Frame& trailer);

  zmq::socket_t socket_;
  bool router_;
  std::string endpoint_;
  int send_timeout_ms_;
  int send_hwm_;
  void* monitor_ = nullptr;  // PAIR receiving socket_'s handshake events, or null
  size_t ring_bytes_;        // 0: no shared memory on this channel
  int64_t max_frame_bytes_;  // ZMQ_MAXMSGSIZE, applied to ring slots too; -1: none
  std::map<std::string, std::unique_ptr<SendRing>> rings_;  // by peer ("" on a DEALER)
  RingReader ring_reader_;
  RingTraffic ring_traffic_;
};

// How long a full ring's oldest slot may stay held before the ring is
// replaced by a new one (its receiver has most likely gone away with it).
constexpr std::chrono::milliseconds kRingPatience{2000};

void ZmqChannel::MoveToRing(const std::string& peer, std::vector<Frame>* frames) {
  RingTrailer trailer;
  for (size_t i = 1; i < frames->size(); ++i) {
    Frame& frame = (*frames)[i];
    if (frame.size() < kSharedRingMinFrameBytes || frame.size() % sizeof(float) != 0) continue;
    std::unique_ptr<SendRing>& ring = rings_[peer];
    if (!ring || (ring->Stuck(kRingPatience) && trailer.slots.empty())) {
      auto made = SendRing::Create(ring_bytes_);
      if (!made.ok()) return;  // the socket carries everything instead
      ring = std::move(made).value();
    }
    std::optional<RingSlot> slot = ring->Put(frame.data(), frame.size());
    if (!slot) continue;
    slot->frame = static_cast<uint32_t>(i - 1);
    ring_traffic_.sent += static_cast<int64_t>(slot->bytes);
    trailer.slots.push_back(*slot);
    trailer.ring = ring->id();
    frame = Frame();
  }
  if (!trailer.slots.empty()) frames->emplace_back(EncodeTrailer(trailer));
}

Status ZmqChannel::TakeFromRing(InMessage* message, const Frame& trailer_frame) {
  PSTRAIN_ASSIGN_OR_RETURN(RingTrailer trailer,
                           DecodeTrailer(trailer_frame.data(), trailer_frame.size()));
  for (size_t i = 0; i < trailer.slots.size(); ++i) {
    const RingSlot& slot = trailer.slots[i];
    Status refused = Status::Ok();
    if (slot.frame >= message->frames.size() || message->frames[slot.frame].size() != 0) {
      refused =
          Status::Corruption("shared-memory trailer: payload frame " + std::to_string(slot.frame) +
                             " is not an empty frame of the message");
    } else if (max_frame_bytes_ >= 0 && slot.bytes > static_cast<uint64_t>(max_frame_bytes_)) {
      refused = Status::InvalidArgument("shared-memory trailer: payload frame " +
                                        std::to_string(slot.frame) + " has " +
                                        std::to_string(slot.bytes) + " bytes, more than the " +
                                        std::to_string(max_frame_bytes_) + " a frame may have");
    } else if (auto payload = ring_reader_.Take(trailer.ring, slot); payload.ok()) {
      message->frames[slot.frame] = Frame::Of(payload.value());
      ring_traffic_.received += static_cast<int64_t>(slot.bytes);
      continue;
    } else {
      refused = payload.status();
    }
    // The message is refused: give its remaining slots back to the sender
    // (taken and dropped at once) so that they do not block its ring.
    for (size_t j = i; j < trailer.slots.size(); ++j)
      (void)ring_reader_.Take(trailer.ring, trailer.slots[j]);
    return refused;
  }
  return Status::Ok();
}

Status ZmqChannel::Monitor(zmq::context_t& context) {
  static std::atomic<uint64_t> next{0};
  const std::string address = "inproc://pstrain-monitor-" + std::to_string(next++);
  const int events = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
  if (zmq_socket_monitor(socket_.handle(), address.c_str(), events) != 0) {
    return ZmqStatus(zmq_errno(), endpoint_ + ": cannot monitor handshakes");
  }
  monitor_ = zmq_socket(context.handle(), ZMQ_PAIR);
  if (monitor_ == nullptr || zmq_connect(monitor_, address.c_str()) != 0) {
    return ZmqStatus(zmq_errno(), endpoint_ + ": cannot monitor handshakes");
  }
  int linger = 0;
  zmq_setsockopt(monitor_, ZMQ_LINGER, &linger, sizeof(linger));
  return Status::Ok();
}

int64_t ZmqChannel::TakeHandshakeFailures() {
  int64_t failures = 0;
  if (monitor_ == nullptr) return 0;
  while (true) {  // an event is two frames: (uint16 event, uint32 value), the endpoint
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (zmq_msg_recv(&part, monitor_, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&part);
      return failures;
    }
    if (zmq_msg_more(&part)) ++failures;  // only an event's first frame has more
    zmq_msg_close(&part);
  }
}

Status ZmqChannel::SendError(const std::string& peer, int err) const {
  std::string where = endpoint_ + ": send";
  if (router_) where += " to peer '" + PrintablePeer(peer) + "'";
  if (err == EHOSTUNREACH) return Status::Unavailable(where + ": peer is unknown or gone");
  if (err == EAGAIN) {
    return Status::DeadlineExceeded(where + ": queue full (high-water mark " +
                                    std::to_string(send_hwm_) + ") for " +
                                    std::to_string(send_timeout_ms_) + " ms");
  }
  return ZmqStatus(err, where);
}

Status ZmqChannel::SendFrames(const std::string& peer, std::vector<Frame> frames) {
  PSTRAIN_CHECK(!frames.empty());
  void* s = socket_.handle();
  if (router_) {
    if (peer.empty()) return Status::InvalidArgument(endpoint_ + ": send on a ROUTER needs a peer");
    Frame route{std::string_view(peer)};
    if (zmq_msg_send(FrameAccess::Of(route), s, ZMQ_SNDMORE) < 0) {
      return SendError(peer, zmq_errno());
    }
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    int flags = i + 1 < frames.size() ? ZMQ_SNDMORE : 0;
    // Once the first frame is queued the rest of the message always fits
    // (ZeroMQ counts whole messages against the high-water mark).
    if (zmq_msg_send(FrameAccess::Of(frames[i]), s, flags) < 0) {
      return SendError(peer, zmq_errno());
    }
  }
  return Status::Ok();
}

Result<std::optional<InMessage>> ZmqChannel::Receive(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    Frame first;
    if (zmq_msg_recv(FrameAccess::Of(first), socket_.handle(), ZMQ_DONTWAIT) >= 0) {
      return ReadMessage(std::move(first));
    }
    if (zmq_errno() != EAGAIN) {
      return ZmqStatus(zmq_errno(), endpoint_ + ": receive");
    }
    long wait_ms = RemainingMs(deadline);
    zmq_pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    int n = zmq_poll(&item, 1, wait_ms);
    if (n < 0 && zmq_errno() != EINTR) {
      return ZmqStatus(zmq_errno(), endpoint_ + ": poll");
    }
    if (n == 0 && wait_ms == 0) return std::optional<InMessage>();
  }
}

// Reads the rest of a message whose first frame is `first`. ZeroMQ delivers
// multipart messages whole, so the remaining frames are already there.
Result<std::optional<InMessage>> ZmqChannel::ReadMessage(Frame first) {
  InMessage message;
  std::vector<Frame> parts;
  bool more = first.more();
  parts.push_back(std::move(first));
  while (more) {
    Frame part;
    if (zmq_msg_recv(FrameAccess::Of(part), socket_.handle(), 0) < 0) {
      return ZmqStatus(zmq_errno(), endpoint_ + ": receive");
    }
    more = part.more();
    parts.push_back(std::move(part));
  }
  size_t header_index = 0;
  if (router_) {
    message.peer.assign(static_cast<const char*>(parts[0].data()), parts[0].size());
    header_index = 1;
  }
  std::string from = endpoint_ + ": message from " +
                     (router_ ? "peer '" + PrintablePeer(message.peer) + "'" : "the server");
  if (parts.size() <= header_index) return Status::Corruption(from + ": no header frame");
  const Frame& head = parts[header_index];
  if (const char* user = zmq_msg_gets(FrameAccess::Of(parts[header_index]), "User-Id")) {
    message.user_id = user;
  }
  if (!message.header.ParseFromArray(head.data(), static_cast<int>(head.size()))) {
    return Status::Corruption(from + ": header does not parse");
  }
  message.header_bytes = head.size();
  message.frames.reserve(parts.size() - header_index - 1);
  for (size_t i = header_index + 1; i < parts.size(); ++i) {
    message.frames.push_back(std::move(parts[i]));
  }
  // A trailer: one frame more than the header lists payloads.
  if (ring_bytes_ > 0 &&
      message.frames.size() == PayloadFrames(message.header) + 1 &&
      LooksLikeTrailer(message.frames.back().data(), message.frames.back().size())) {
    Frame trailer = std::move(message.frames.back());
    message.frames.pop_back();
    PSTRAIN_RETURN_IF_ERROR(TakeFromRing(&message, trailer).WithContext(from));
  }
  message.AlignPayloads();
  return std::optional<InMessage>(std::move(message));
}

bool IsTcp(const std::string& address) { return address.rfind("tcp://", 0) == 0; }
bool IsIpc(const std::string& address) { return address.rfind("ipc://", 0) == 0; }

Status Configure(zmq::socket_t& socket, bool router, const std::string& address,
                 const SocketOptions& o) {
  PSTRAIN_RETURN_IF_ERROR(SetInt(socket, ZMQ_LINGER, o.linger_ms, "ZMQ_LINGER"));
  PSTRAIN_RETURN_IF_ERROR(SetInt(socket, ZMQ_SNDHWM, o.send_hwm, "ZMQ_SNDHWM"));
  PSTRAIN_RETURN_IF_ERROR(SetInt(socket, ZMQ_RCVHWM, o.recv_hwm, "ZMQ_RCVHWM"));
  PSTRAIN_RETURN_IF_ERROR(SetInt(socket, ZMQ_SNDTIMEO, o.send_timeout_ms, "ZMQ_SNDTIMEO"));
  PSTRAIN_RETURN_IF_ERROR(SetOption(socket, ZMQ_MAXMSGSIZE, &o.max_message_bytes,
                                    sizeof(o.max_message_bytes), "ZMQ_MAXMSGSIZE"));
  if (o.send_buffer_bytes > 0) {
    PSTRAIN_RETURN_IF_ERROR(SetInt(socket, ZMQ_SNDBUF, o.send_buffer_bytes, "ZMQ_SNDBUF"));
  }
  if (router && !o.curve_secret_key.empty()) {
    PSTRAIN_RETURN_IF_ERROR(SetInt(socket, ZMQ_CURVE_SERVER, 1, "ZMQ_CURVE_SERVER"));
    PSTRAIN_RETURN_IF_ERROR(SetOption(socket, ZMQ_CURVE_SECRETKEY, o.curve_secret_key.data(),
                                      o.curve_secret_key.size(), "ZMQ_CURVE_SECRETKEY"));
    const std::string domain = "pstrain";
    PSTRAIN_RETURN_IF_ERROR(
        SetOption(socket, ZMQ_ZAP_DOMAIN, domain.data(), domain.size(), "ZMQ_ZAP_DOMAIN"));
  } else if (!router && !o.curve_server_key.empty()) {
    PSTRAIN_RETURN_IF_ERROR(SetOption(socket, ZMQ_CURVE_SERVERKEY, o.curve_server_key.data(),
                                      o.curve_server_key.size(), "ZMQ_CURVE_SERVERKEY"));
    PSTRAIN_RETURN_IF_ERROR(SetOption(socket, ZMQ_CURVE_PUBLICKEY, o.curve_public_key.data(),
                                      o.curve_public_key.size(), "ZMQ_CURVE_PUBLICKEY"));
    PSTRAIN_RETURN_IF_ERROR(SetOption(socket, ZMQ_CURVE_SECRETKEY, o.curve_secret_key.data(),
                                      o.curve_secret_key.size(), "ZMQ_CURVE_SECRETKEY"));
  }
  if (router) {
    PSTRAIN_RETURN_IF_ERROR(SetInt(socket, ZMQ_ROUTER_MANDATORY, 1, "ZMQ_ROUTER_MANDATORY"));
    PSTRAIN_RETURN_IF_ERROR(SetInt(socket, ZMQ_ROUTER_HANDOVER, 1, "ZMQ_ROUTER_HANDOVER"));
  } else if (!o.identity.empty()) {
    PSTRAIN_RETURN_IF_ERROR(
        SetOption(socket, ZMQ_ROUTING_ID, o.identity.data(), o.identity.size(), "ZMQ_ROUTING_ID"));
  }
  if (o.io_thread >= 0) {
    const uint64_t affinity = uint64_t{1} << (o.io_thread % 64);
    PSTRAIN_RETURN_IF_ERROR(
        SetOption(socket, ZMQ_AFFINITY, &affinity, sizeof(affinity), "ZMQ_AFFINITY"));
  }
  if (IsTcp(address)) {
    if (address.find('[') != std::string::npos) {
      PSTRAIN_RETURN_IF_ERROR(SetInt(socket, ZMQ_IPV6, 1, "ZMQ_IPV6"));
    }
    PSTRAIN_RETURN_IF_ERROR(
        SetInt(socket, ZMQ_HEARTBEAT_IVL, o.heartbeat_ivl_ms, "ZMQ_HEARTBEAT_IVL"));
    PSTRAIN_RETURN_IF_ERROR(
        SetInt(socket, ZMQ_HEARTBEAT_TIMEOUT, o.heartbeat_timeout_ms, "ZMQ_HEARTBEAT_TIMEOUT"));
    PSTRAIN_RETURN_IF_ERROR(
        SetInt(socket, ZMQ_HEARTBEAT_TTL, o.heartbeat_timeout_ms, "ZMQ_HEARTBEAT_TTL"));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Channel>> MakeChannel(Context& context, zmq::socket_type type,
                                             const std::string& address,
                                             const SocketOptions& options) {
  const bool router = type == zmq::socket_type::router;
  zmq::socket_t socket;
  try {
    socket = zmq::socket_t(ContextAccess::Of(context), type);
  } catch (const zmq::error_t& e) {
    return ZmqStatus(e.num(), address + ": cannot create socket");
  }
  std::string verb = router ? "bind" : "connect";
  const bool curve_server = router && !options.curve_secret_key.empty();
  if (curve_server && !ContextAccess::Admits(context)) {
    return Status::FailedPrecondition("cannot bind " + address +
                                      " with CURVE: no keys are admitted (Context::AdmitKeys)");
  }
  PSTRAIN_RETURN_IF_ERROR(
      Configure(socket, router, address, options).WithContext("cannot " + verb + " " + address));
  int rc = router ? zmq_bind(socket.handle(), address.c_str())
                  : zmq_connect(socket.handle(), address.c_str());
  if (rc != 0) return ZmqStatus(zmq_errno(), "cannot " + verb + " " + address);
  std::string endpoint = address;
  if (router) {
    char buffer[1024];
    size_t size = sizeof(buffer);
    if (zmq_getsockopt(socket.handle(), ZMQ_LAST_ENDPOINT, buffer, &size) == 0 && size > 1) {
      endpoint.assign(buffer, size - 1);  // size counts the terminating 0
    }
  }
  SocketOptions used = options;
  if (!IsIpc(address)) used.shared_memory_bytes = 0;
  auto channel = std::make_unique<ZmqChannel>(std::move(socket), router, std::move(endpoint), used);
  if (curve_server) PSTRAIN_RETURN_IF_ERROR(channel->Monitor(ContextAccess::Of(context)));
  return std::unique_ptr<Channel>(std::move(channel));
}

}  // namespace

Channel::~Channel() = default;

Status Channel::Send(const std::string& peer, OutMessage message) {
  const Header& header = message.header;
  auto where = [&] {
    std::string text = endpoint() + ": send";
    if (!peer.empty()) text += " to peer '" + PrintablePeer(peer) + "'";
    return text;
  };
  if (PayloadFrames(header) != message.payloads.size()) {
    return Status::InvalidArgument(
        where() + ": header lists " + std::to_string(header.chunks_size()) + " chunks" +
        (header.has_factors() ? " with factors (2 payloads)" : "") + " but " +
        std::to_string(message.payloads.size()) + " payloads are given");
  }
  // The chunks' own frames come first (a PULL_REPLY's history and relayed
  // factors follow them; a GPU IPC push has none).
  const int chunk_frames =
      std::min(header.chunks_size(), static_cast<int>(message.payloads.size()));
  for (int i = 0; i < chunk_frames && !header.has_factors(); ++i) {
    // A compressed payload (dtype other than FLOAT32) has its encoding's size.
    if (header.dtype() == pstrain::FLOAT32 &&
        header.chunks(i).length() != message.payloads[i].count) {
      return Status::InvalidArgument(where() + ": chunk " + std::to_string(header.chunks(i).id()) +
                                     ": header says " + std::to_string(header.chunks(i).length()) +
                                     " values, the payload has " +
                                     std::to_string(message.payloads[i].count));
    }
  }
  if (!header.IsInitialized()) {
    return Status::InvalidArgument(where() + ": header misses " +
                                   header.InitializationErrorString());
  }
  std::vector<Frame> frames;
  frames.reserve(message.payloads.size() + 1);
  frames.emplace_back(header.ByteSizeLong());
  header.SerializeWithCachedSizesToArray(static_cast<uint8_t*>(frames[0].data()));
  for (const Payload& payload : message.payloads) frames.push_back(Frame::Of(payload));
  PrepareSend(peer, &frames);
  return SendFrames(peer, std::move(frames));
}

Result<std::unique_ptr<Channel>> BindRouter(Context& context, const std::string& address,
                                            const SocketOptions& options) {
  return MakeChannel(context, zmq::socket_type::router, address, options);
}

Result<std::unique_ptr<Channel>> ConnectDealer(Context& context, const std::string& address,
                                               const SocketOptions& options) {
  return MakeChannel(context, zmq::socket_type::dealer, address, options);
}

Result<int> PollAny(const std::vector<Channel*>& channels, std::chrono::milliseconds timeout) {
  std::vector<zmq_pollitem_t> items;
  items.reserve(channels.size());
  for (Channel* channel : channels) {
    items.push_back(zmq_pollitem_t{channel->poll_handle(), 0, ZMQ_POLLIN, 0});
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    long wait_ms = RemainingMs(deadline);
    int n = zmq_poll(items.data(), static_cast<int>(items.size()), wait_ms);
    if (n < 0 && zmq_errno() != EINTR) return ZmqStatus(zmq_errno(), "poll");
    for (size_t i = 0; n > 0 && i < items.size(); ++i) {
      if (items[i].revents & ZMQ_POLLIN) return static_cast<int>(i);
    }
    if (n == 0 && wait_ms == 0) return -1;
  }
}

}  // namespace pstrain::transport

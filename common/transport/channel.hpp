// Channel: one ZeroMQ socket that sends and receives whole PSTrain messages.
//
// A server binds one ROUTER (BindRouter); a worker holds one DEALER per server
// (ConnectDealer). A Channel is used by one thread at a time; the Context it
// was made in must outlive it. Tests wrap a Channel in a fault-injecting one
// (fault.hpp). ZeroMQ itself stays inside common/transport/*.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "common/transport/context.hpp"
#include "common/transport/message.hpp"

namespace pstrain::transport {

struct SocketOptions {
  int send_hwm = 1000;  // messages queued per peer before Send waits
  int recv_hwm = 1000;
  int linger_ms = 0;     // how long unsent messages are kept at close
  std::string identity;  // DEALER routing id (ZMQ_ROUTING_ID); "" = ZeroMQ picks one
  // The context's I/O thread this socket's connections use (ZMQ_AFFINITY,
  // taken modulo the context's count); -1 = ZeroMQ picks the least busy when
  // the connection is made (at start-up all look idle: the first one).
  int io_thread = -1;
  // ZeroMQ heartbeats (tcp only): a connection silent for heartbeat_timeout_ms is closed.
  int heartbeat_ivl_ms = 1000;
  int heartbeat_timeout_ms = 10000;
  int send_timeout_ms = 10000;     // Send waits at most this long on a full queue
  int64_t max_message_bytes = -1;  // ZMQ_MAXMSGSIZE for one frame; -1 = no limit
  // tcp: the kernel's send buffer of each connection (ZMQ_SNDBUF, SO_SNDBUF);
  // 0 = the OS default (autotuned, up to net.ipv4.tcp_wmem's maximum).
  int send_buffer_bytes = 0;
  // ipc only (ignored elsewhere): payload frames of kSharedRingMinFrameBytes
  // or more travel through a shared-memory ring of this many bytes per peer
  // (shared_ring.hpp); 0 = every byte through the socket. Both ends of a
  // connection must agree: a receiver without it refuses such messages.
  size_t shared_memory_bytes = 0;
  // CURVE (curve.hpp), keys as 40 Z85 characters. On a ROUTER, a secret key
  // makes it a CURVE server: it then admits only the keys of its Context's
  // AdmitKeys, and BindRouter fails when none were given. On a DEALER, all
  // three make it a CURVE client of the server whose public key is
  // curve_server_key (a server without its secret key cannot answer).
  std::string curve_public_key;
  std::string curve_secret_key;
  std::string curve_server_key;
};

// Payload bytes that went through shared-memory rings (SocketOptions::
// shared_memory_bytes) instead of the socket.
struct RingTraffic {
  int64_t sent = 0;
  int64_t received = 0;
};

class Channel {
 public:
  Channel() = default;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  virtual ~Channel();

  // Sends header + payload frames, the payloads without copying. `peer`: the
  // routing id on a ROUTER, ignored on a DEALER. Errors, naming the endpoint
  // and peer: header chunks and payloads disagree, header misses required
  // fields, peer unknown or gone (ROUTER), queue still full after
  // send_timeout_ms, context terminated.
  virtual Status Send(const std::string& peer, OutMessage message);

  // Sends frames as they are: frames[0] is the header, already serialized,
  // the rest are payloads. Nothing is checked (the fault injector uses this to
  // send broken messages). REQUIRES: !frames.empty().
  virtual Status SendFrames(const std::string& peer, std::vector<Frame> frames) = 0;

  // Waits up to `timeout` for one whole message; std::nullopt on timeout. A
  // message whose frame 0 is not a Header (or that has no frame 0) is consumed
  // and returned as an error ("<endpoint>: message from <peer>: header does
  // not parse"): the caller logs, counts and goes on. The payloads are not
  // validated: run Validate() before using them.
  virtual Result<std::optional<InMessage>> Receive(std::chrono::milliseconds timeout) = 0;

  // The bound address (port resolved when bound to port 0) or the connected one.
  virtual const std::string& endpoint() const = 0;

  // A CURVE ROUTER: the handshakes that failed since the last call for a
  // reason other than a refused key (those are the Context's TakeRefusals):
  // a peer without CURVE, one using another server key. 0 elsewhere.
  virtual int64_t TakeHandshakeFailures() { return 0; }

  // Payload bytes sent and received through shared memory so far.
  virtual RingTraffic ring_traffic() const { return {}; }

 private:
  friend Result<int> PollAny(const std::vector<Channel*>& channels,
                             std::chrono::milliseconds timeout);
  friend class FaultChannel;
  // The ZeroMQ socket to poll, opaque outside channel.cpp.
  virtual void* poll_handle() = 0;
  // Send's last step before SendFrames: a channel with shared memory moves
  // large payload frames into its ring here (SendFrames sends as it is told).
  virtual void PrepareSend(const std::string& /*peer*/, std::vector<Frame>* /*frames*/) {}
};

// A ROUTER bound to `address` (MakeAddress), with ZMQ_ROUTER_MANDATORY (sends
// to unknown peers fail) and ZMQ_ROUTER_HANDOVER (a peer reconnecting with the
// same identity takes over its routing id).
Result<std::unique_ptr<Channel>> BindRouter(Context& context, const std::string& address,
                                            const SocketOptions& options = {});
// A DEALER connected to `address`. Messages sent before the connection is up
// are queued (up to send_hwm).
Result<std::unique_ptr<Channel>> ConnectDealer(Context& context, const std::string& address,
                                               const SocketOptions& options = {});

// Index of the first channel with a message ready, or -1 after `timeout`.
Result<int> PollAny(const std::vector<Channel*>& channels, std::chrono::milliseconds timeout);

}  // namespace pstrain::transport

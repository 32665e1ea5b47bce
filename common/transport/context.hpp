// Context: the transport's process-wide state (ZeroMQ's context and its I/O
// threads). Make one per process (tests may make several) and keep it until
// every Channel made in it is destroyed. Thread-safe: channels for several
// threads may be made in one context, each then used by its own thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace pstrain::transport {

// The most ZeroMQ I/O threads a program takes (--io-threads; transport.io_threads).
inline constexpr int kIoThreadsMax = 64;

class Context {
 public:
  // io_threads >= 1: ZeroMQ's I/O threads (ZMQ_IO_THREADS). A connection is
  // served by one of them: a worker's DEALERs, one per shard, take them in
  // turn (SocketOptions::io_thread), and a shard's ROUTER gives each accepted
  // connection the least busy one when it connects, so their kernel copies
  // and CURVE spread (transport.io_threads, docs/architecture.md).
  explicit Context(int io_threads = 1);
  int io_threads() const;
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Admits CURVE clients to this context's CURVE ROUTERs
  // (SocketOptions::curve_secret_key) by public key: `admitted` maps a Z85
  // public key to the peer name every message of that connection then carries
  // (InMessage::user_id, curve.hpp's PeerName). Every other client is refused
  // during its handshake: it never delivers a message. Call once, before
  // binding a CURVE ROUTER. Error: called twice.
  Status AdmitKeys(std::map<std::string, std::string> admitted);
  // Clients refused since the last call: `*count` of them in all, and a
  // description of the first ones (the peer's address and why).
  std::vector<std::string> TakeRefusals(int64_t* count);

 private:
  friend class ContextAccess;  // channel.cpp: the ZeroMQ context inside
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pstrain::transport

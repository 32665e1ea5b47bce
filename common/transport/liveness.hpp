// PeerLiveness: when each peer was last heard from, to find the silent ones.
//
// ZeroMQ's own heartbeats (SocketOptions) close dead tcp connections; this
// table is the application's view: ShardLoop marks a worker heard on every
// valid message (HEARTBEAT included) and reports the workers silent for
// longer than kSilenceWarning (protocol.hpp). Not thread-safe: one owner
// thread.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace pstrain::transport {

class PeerLiveness {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Records that `peer` was heard at `now` (times never go back for a peer).
  void Heard(const std::string& peer, TimePoint now);
  // Peers last heard more than `timeout` before `now`, in name order.
  std::vector<std::string> Silent(TimePoint now, std::chrono::milliseconds timeout) const;
  // Stops tracking `peer` (it said goodbye or was declared lost).
  void Forget(const std::string& peer);

  bool Knows(const std::string& peer) const { return last_heard_.count(peer) > 0; }
  // REQUIRES: Knows(peer).
  TimePoint last_heard(const std::string& peer) const { return last_heard_.at(peer); }
  size_t size() const { return last_heard_.size(); }

 private:
  std::map<std::string, TimePoint> last_heard_;
};

}  // namespace pstrain::transport

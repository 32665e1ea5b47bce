#include "common/transport/liveness.hpp"

namespace pstrain::transport {

void PeerLiveness::Heard(const std::string& peer, TimePoint now) {
  auto [it, inserted] = last_heard_.try_emplace(peer, now);
  if (!inserted && now > it->second) it->second = now;
}

std::vector<std::string> PeerLiveness::Silent(TimePoint now,
                                              std::chrono::milliseconds timeout) const {
  std::vector<std::string> silent;
  for (const auto& [peer, heard] : last_heard_) {
    if (now - heard > timeout) silent.push_back(peer);
  }
  return silent;
}

void PeerLiveness::Forget(const std::string& peer) { last_heard_.erase(peer); }

}  // namespace pstrain::transport

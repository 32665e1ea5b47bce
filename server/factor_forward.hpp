// ForwardedRights: a shard's pairing of the factor pushes that came without
// R (FactorShape.right_forwarded: ps-worker --factor-right holder, R pushed
// once, to its holder shard) with the R a worker forwards in a FACTOR_RIGHT
// (docs/wire-protocol.md, "Factor relay"; docs/architecture.md, "R pushed
// once"). Either half may come first: a push waits for its R, an R is kept
// for the pushes of its step (two steps per parameter and worker, as the
// relay keeps factors: a restarted worker pushes its step again and finds
// the R here). The completed push is the message as a complete factor push
// would have been (its frames L, then R), for FactorArrival and ShardState:
// duplicates, clocks, the rank-ordered sum, landing and restarts as usual.
// The shard loop's thread only.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "common/ps/key_placement.hpp"
#include "common/transport/message.hpp"
#include "server/factor_arrival.hpp"
#include "server/shard_state.hpp"

namespace pstrain::server {

class ForwardedRights {
 public:
  // REQUIRES (both): transport::Validate accepted the message against the
  // placement `placement` (the shard's, after the init push).
  // A PUSH with FactorShape.right_forwarded: the push with its R appended
  // (two frames) when that R is here; else kept (replacing a kept push of the
  // same parameter, worker and clock) and nullopt.
  std::optional<transport::InMessage> OnLeft(transport::InMessage push,
                                             const KeyPlacement& placement, int num_workers);
  // A FACTOR_RIGHT from a worker: kept, and the push it completes, if one waits.
  std::optional<transport::InMessage> OnRight(transport::InMessage right,
                                              const KeyPlacement& placement, int num_workers);
  // Pushes waiting for their R.
  size_t waiting() const { return waiting_.size(); }

 private:
  struct Right {
    int64_t step = -1;
    transport::InMessage message;  // its one frame is R
  };
  using Key = std::tuple<int, int, int64_t>;  // parameter, worker, clock
  void Size(const KeyPlacement& placement, int num_workers);
  // `push` with a share of `right`'s frame appended.
  static transport::InMessage Complete(transport::InMessage push, Right& right);

  std::vector<std::vector<std::array<Right, 2>>> rights_;  // [param][worker][step % 2]
  std::map<Key, transport::InMessage> waiting_;
};

// As ShardLoop::Receive (and the message fuzzer) hand `shard` a validated
// factor PUSH with right_forwarded or a FACTOR_RIGHT from a worker: refused
// outside the relay's scope (RefuseRelay: an ERROR for the push; a
// FACTOR_RIGHT, which has no answer, is dropped with *dropped set to why);
// a push is acknowledged at once (its R may come only after the worker's
// next pull, and its in-flight window must not wait for that); the push the
// pair completes goes through `factors` and shard.Handle as a complete factor
// push from its worker, its bytes_received the L frame's alone, its PUSH_ACK
// not sent again. Returns what to send.
std::vector<Outgoing> ReceiveForwarding(transport::InMessage message, ShardState& shard,
                                        ForwardedRights& rights, FactorArrival& factors,
                                        ShardState::TimePoint now, std::string* dropped);

}  // namespace pstrain::server

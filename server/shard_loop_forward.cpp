// ShardLoop: R pushed once (ps-worker --factor-right holder). A factor push
// that came without R is acknowledged at once (its R comes only after the
// worker's holders answered the next pull, and the worker's in-flight window
// must not wait for that) and waits in rights_ for the FACTOR_RIGHT a worker
// forwards; the pair goes on exactly as a complete factor push from its
// worker (FactorArrival, then ShardState), its PUSH_ACK already sent.
#include <algorithm>

#include "server/factor_relay.hpp"
#include "server/shard_loop.hpp"

namespace pstrain::server {

void ShardLoop::ReceiveForwarding(transport::InMessage message, TimePoint now) {
  const bool push = message.header.type() == pstrain::PUSH;
  Incoming arrived{message.peer, message.header, {}, {}};
  const KeyPlacement* placement = shard_.placement();
  std::string why = RefuseRelay(shard_.config(), shard_.policy_names());
  if (placement == nullptr) why = "R forwarded before the init push";
  if (!why.empty()) {
    if (push) {
      SendAll({shard_.Refuse(arrived, why)});
    } else {  // a FACTOR_RIGHT has no answer: dropped, counted, logged
      shard_.CountBadMessage();
      drops_.Report("dropped " + transport::Describe(message) + ": " + why, now);
    }
    return;
  }
  if (push) SendAll({shard_.Acknowledge(arrived)});
  const int workers = shard_.config().num_workers;
  std::optional<transport::InMessage> complete =
      push ? rights_.OnLeft(std::move(message), *placement, workers)
           : rights_.OnRight(std::move(message), *placement, workers);
  if (!complete) return;
  Incoming incoming{complete->peer, complete->header, {}, {}};
  factors_.Prepare(*complete, *placement, &incoming);
  incoming.wire_bytes = static_cast<int64_t>(complete->payload_bytes(0));  // R came forwarded
  std::vector<Outgoing> out = shard_.Handle(incoming, now);
  // Acknowledged when it arrived: not again.
  auto ack = std::find_if(out.begin(), out.end(), [&](const Outgoing& o) {
    return o.header.type() == pstrain::PUSH_ACK && o.peer == incoming.peer;
  });
  if (ack != out.end()) out.erase(ack);
  SendAll(std::move(out));
}

}  // namespace pstrain::server

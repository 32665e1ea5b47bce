#include "server/factor_forward.hpp"

#include <algorithm>
#include <utility>

#include "server/factor_relay.hpp"

namespace pstrain::server {

std::vector<Outgoing> ReceiveForwarding(transport::InMessage message, ShardState& shard,
                                        ForwardedRights& rights, FactorArrival& factors,
                                        ShardState::TimePoint now, std::string* dropped) {
  const bool push = message.header.type() == pstrain::PUSH;
  const Incoming arrived{message.peer, message.header, {}, {}};
  const KeyPlacement* placement = shard.placement();
  std::string why = RefuseRelay(shard.config(), shard.policy_names());
  if (placement == nullptr) why = "R forwarded before the init push";
  if (!why.empty()) {
    if (push) return {shard.Refuse(arrived, why)};
    shard.CountBadMessage();  // a FACTOR_RIGHT has no answer
    *dropped = why;
    return {};
  }
  std::vector<Outgoing> out;
  if (push) out.push_back(shard.Acknowledge(arrived));
  const int workers = shard.config().num_workers;
  std::optional<transport::InMessage> complete =
      push ? rights.OnLeft(std::move(message), *placement, workers)
           : rights.OnRight(std::move(message), *placement, workers);
  if (!complete) return out;
  Incoming incoming{complete->peer, complete->header, {}, {}};
  factors.Prepare(*complete, *placement, &incoming, shard.apply_threads());
  incoming.wire_bytes = static_cast<int64_t>(complete->payload_bytes(0));  // R came forwarded
  std::vector<Outgoing> handled = shard.Handle(incoming, now);
  // Acknowledged when it arrived: not again.
  auto ack = std::find_if(handled.begin(), handled.end(), [&](const Outgoing& o) {
    return o.header.type() == pstrain::PUSH_ACK && o.peer == incoming.peer;
  });
  if (ack != handled.end()) handled.erase(ack);
  for (Outgoing& o : handled) out.push_back(std::move(o));
  return out;
}

void ForwardedRights::Size(const KeyPlacement& placement, int num_workers) {
  if (!rights_.empty()) return;
  rights_.resize(static_cast<size_t>(placement.num_params()));
  for (auto& by_worker : rights_) by_worker.resize(static_cast<size_t>(num_workers));
}

transport::InMessage ForwardedRights::Complete(transport::InMessage push, Right& right) {
  push.frames.push_back(right.message.frames[0].Share());
  push.aligned.clear();
  push.AlignPayloads();
  return push;
}

std::optional<transport::InMessage> ForwardedRights::OnLeft(transport::InMessage push,
                                                            const KeyPlacement& placement,
                                                            int num_workers) {
  Size(placement, num_workers);
  const int param = placement.chunk(push.header.chunks(0).id()).param;
  const int worker = push.header.sender();
  const int64_t clock = push.header.clock();
  Right& right = rights_[static_cast<size_t>(param)][static_cast<size_t>(worker)]
                        [static_cast<size_t>(clock % 2)];
  if (right.step == clock) return Complete(std::move(push), right);
  waiting_.insert_or_assign(Key{param, worker, clock}, std::move(push));
  return std::nullopt;
}

std::optional<transport::InMessage> ForwardedRights::OnRight(transport::InMessage message,
                                                             const KeyPlacement& placement,
                                                             int num_workers) {
  Size(placement, num_workers);
  const pstrain::FactorRight& r = message.header.right();
  const int param = static_cast<int>(r.param());
  const int worker = static_cast<int>(r.worker());
  const int64_t step = message.header.clock();
  Right& right = rights_[static_cast<size_t>(param)][static_cast<size_t>(worker)]
                        [static_cast<size_t>(step % 2)];
  if (step < right.step) return std::nullopt;  // older than what the slot holds
  right.step = step;
  right.message = std::move(message);
  auto waiting = waiting_.find(Key{param, worker, step});
  if (waiting == waiting_.end()) return std::nullopt;
  transport::InMessage push = std::move(waiting->second);
  waiting_.erase(waiting);
  return Complete(std::move(push), right);
}

}  // namespace pstrain::server

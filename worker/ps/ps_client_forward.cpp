// PsClient: R pushed once (PsClientOptions::factor_right_holder;
// docs/architecture.md, "R pushed once"). A worker's holder shard sends its
// R ahead of the step to every worker whose pull asked (rights_ahead); each
// worker forwards it to the shards it forwards to that hold rows of the
// weight (they had L alone from the pusher), and its replica takes it in
// place of an R in the relay. The forward goes while the worker waits for
// anything (ReceiveOne), so a shard's step never waits on a worker that
// waits for that step.
#include <memory>
#include <vector>

#include "common/ps/factor_relay.hpp"
#include "common/ps/sufficient_factors.hpp"
#include "worker/ps/factor_broadcast.hpp"
#include "worker/ps/ps_client.hpp"

namespace pstrain {

Status PsClient::OnFactorRight(int shard, const transport::InMessage& right) {
  const pstrain::FactorRight& r = right.header.right();
  const int param = static_cast<int>(r.param());
  const int holder = RelayHolder(placement_, param, static_cast<int>(r.worker()));
  std::shared_ptr<const std::vector<float>> frame;  // one copy, shared by every forward
  for (size_t k = 0; k < channels_.size(); ++k) {
    const int target = static_cast<int>(k);
    bool mine = forward_all_;
    if (options_.forward_shards.empty()) {
      mine = mine || target % options_.world_size == options_.rank;
    } else {
      for (int s : options_.forward_shards) mine = mine || s == target;
    }
    if (!mine || target == holder || ParamChunksOn(placement_, param, target).empty()) continue;
    if (!frame) {
      const float* words = right.payload(0);
      frame = std::make_shared<const std::vector<float>>(
          words, words + right.payload_bytes(0) / sizeof(float));
    }
    transport::OutMessage forward{transport::NewHeader(origin(), pstrain::FACTOR_RIGHT), {}};
    forward.header.set_clock(right.header.clock());
    *forward.header.mutable_right() = r;
    forward.payloads.push_back(transport::Payload::Of(frame));
    PSTRAIN_RETURN_IF_ERROR(Send(target, std::move(forward)));
    ++traffic_.rights_forwarded;
  }
  if (factor_broadcast_ != nullptr) {
    PSTRAIN_RETURN_IF_ERROR(
        factor_broadcast_->AcceptRight(ServerName(static_cast<size_t>(shard)), right));
  }
  return Status::Ok();
}

}  // namespace pstrain

// ShardState: sufficient-factor broadcasting (server/factor_relay.hpp) -- the
// factors of pushes kept for the relay, the checks of a PULL that asks for
// it, and the history and relay frames of its replies.
#include <algorithm>

#include "common/ps/factor_relay.hpp"
#include "server/shard_state.hpp"

namespace pstrain::server {

bool ShardState::KeepRelay(const Incoming& m, Out& out) {
  const std::string why = RefuseRelay(core_->config, policy_names());
  if (!why.empty()) {
    Reject(m, why, out);
    return false;
  }
  if (!relay_.installed()) {
    relay_.Install(core_->layout.placement, core_->config.shard, core_->config.num_workers);
    // A restarted worker's first pull takes the history of its iteration too.
    core_->keep_step_start_history = true;
  }
  relay_.Keep(m.header, m.header.sender(), m.factor_dtype, m.factor_left, m.factor_right);
  SendRightsAhead(out);
  return true;
}

void ShardState::SendRightsAhead(Out& out) {
  if (!relay_.installed()) return;
  const KeyPlacement& placement = core_->layout.placement;
  for (RightsWanted& wanted : rights_wanted_) {
    std::erase_if(wanted.params, [&](uint32_t param) {
      if (ParamChunksOn(placement, static_cast<int>(param), core_->config.shard).empty()) {
        return true;  // no chunk of it here: nothing to send
      }
      std::vector<Outgoing> rights =
          relay_.RightsAhead(static_cast<int>(param), wanted.step, wanted.peer, origin());
      if (rights.empty() && RelayHolds(static_cast<int>(param))) return false;  // not all in
      for (Outgoing& o : rights) out.push_back(std::move(o));
      return true;
    });
  }
}

bool ShardState::RelayHolds(int param) const {
  for (int w = 0; w < core_->config.num_workers; ++w) {
    if (RelayHolder(core_->layout.placement, param, w) == core_->config.shard) return true;
  }
  return false;
}

Outgoing ShardState::Refuse(const Incoming& m, const std::string& why) {
  Out out;
  Reject(m, why, out);
  return std::move(out.front());
}

bool ShardState::CheckBroadcastPull(const Incoming& m, Out& out) {
  const pstrain::Header& h = m.header;
  if (h.broadcast().empty() && h.history_params().empty() && h.rights_ahead().empty()) {
    return true;
  }
  if (const std::string why = RefuseRelay(core_->config, policy_names()); !why.empty()) {
    Reject(m, why, out);
    return false;
  }
  if (!h.broadcast().empty() && h.clock() < 1) {
    Reject(m, "a pull for iteration 0 asks for factors (there is no step before it to relay)", out);
    return false;
  }
  return true;
}

bool ShardState::InBroadcast(const DeferredPull& pull, uint32_t id) const {
  if (pull.broadcast.empty()) return false;
  const uint32_t param = static_cast<uint32_t>(core_->layout.placement.chunk(id).param);
  return std::find(pull.broadcast.begin(), pull.broadcast.end(), param) != pull.broadcast.end();
}

bool ShardState::InHistory(const DeferredPull& pull, uint32_t id) const {
  const uint32_t param = static_cast<uint32_t>(core_->layout.placement.chunk(id).param);
  return std::find(pull.history_params.begin(), pull.history_params.end(), param) !=
         pull.history_params.end();
}

bool ShardState::WeightReady(uint32_t id, const std::function<bool(int)>& ready) const {
  const KeyPlacement& placement = core_->layout.placement;
  for (uint32_t other : ParamChunksOn(placement, placement.chunk(id).param, core_->config.shard)) {
    if (!ready(core_->store().LocalIndex(other))) return false;
  }
  return true;
}

Status ShardState::AddHistoryAndRelay(const DeferredPull& pull, const std::vector<int>& relayed,
                                      const std::vector<int>& sent, Outgoing& o) {
  const ChunkStore& store = core_->store();
  const KeyPlacement& placement = core_->layout.placement;
  // History: the slots of the sent chunks of history_params, slot by slot.
  // (A chunk whose step pull.clock landed ahead of the rest sends the history
  // from before that step, as PullReply sends its weights: ShardCore::StepStart.)
  std::vector<std::pair<uint32_t, const ShardCore::StepStart*>> history;
  for (int c : sent) {
    const uint32_t id = store.chunk_ids()[static_cast<size_t>(c)];
    if (InHistory(pull, id)) history.emplace_back(id, core_->StepStartOf(c, pull.clock));
  }
  if (!history.empty() && store.history_slots() > 0) {
    o.header.set_history_slots(static_cast<uint32_t>(store.history_slots()));
    for (const auto& [id, before] : history) o.header.add_history_chunks(id);
    for (int k = 0; k < store.history_slots(); ++k) {
      for (const auto& [id, before] : history) {
        if (before != nullptr &&
            before->history.size() != static_cast<size_t>(store.history_slots())) {
          return Status::FailedPrecondition(
              "chunk " + std::to_string(id) + "'s step " + std::to_string(pull.clock) +
              " is applied and its history from before it was not kept (worker " +
              std::to_string(pull.worker) + " asked for it)");
        }
        const std::span<const float> h =
            before != nullptr ? std::span<const float>(before->history[static_cast<size_t>(k)])
                              : store.history(id, k);
        o.payloads.push_back(std::make_shared<const std::vector<float>>(h.begin(), h.end()));
      }
    }
  }
  // Relay: each weight whose chunks here go now, once.
  std::vector<int> params;
  for (int c : relayed) {
    const int param = placement.chunk(store.chunk_ids()[static_cast<size_t>(c)]).param;
    if (std::find(params.begin(), params.end(), param) == params.end()) params.push_back(param);
  }
  if (params.empty()) return Status::Ok();
  if (!relay_.installed()) {
    return Status::FailedPrecondition("no factors were pushed with relay (worker " +
                                      std::to_string(pull.worker) + " asked for parameter " +
                                      std::to_string(params[0]) + " as factors)");
  }
  for (int param : params) {
    const bool ahead = std::find(pull.rights_ahead.begin(), pull.rights_ahead.end(),
                                 static_cast<uint32_t>(param)) != pull.rights_ahead.end();
    PSTRAIN_RETURN_IF_ERROR(relay_.AddTo(param, pull.clock - 1, o, /*rights=*/!ahead));
  }
  o.header.set_relay_scale(policy_->StepScale());
  return Status::Ok();
}

}  // namespace pstrain::server

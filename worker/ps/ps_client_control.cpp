// PsClient: the requests of the orchestrator and of a driver (role CONTROL,
// or worker 0's own client): SHUTDOWN, STATS, and the step gate (GATE and the
// wait for every worker's clock, pstrain.DistributedSolver's step).
#include <algorithm>
#include <thread>

#include "worker/ps/ps_client.hpp"

namespace pstrain {

using transport::InMessage;
using transport::OutMessage;
using Clock = std::chrono::steady_clock;

Status PsClient::Shutdown() {
  for (size_t k = 0; k < channels_.size(); ++k) {
    PSTRAIN_RETURN_IF_ERROR(Send(
        static_cast<int>(k), OutMessage{transport::NewHeader(origin(), pstrain::SHUTDOWN), {}}));
  }
  // Wait for the acknowledgements: closing with linger 0 would drop the requests.
  const auto saved = options_.timeout;
  options_.timeout = std::chrono::milliseconds(5000);
  Status s = AwaitFromShards(pstrain::SHUTDOWN, std::vector<bool>(channels_.size(), true), nullptr);
  options_.timeout = saved;
  return s;
}

Result<std::vector<pstrain::ShardStats>> PsClient::Stats() {
  for (size_t k = 0; k < channels_.size(); ++k) {
    PSTRAIN_RETURN_IF_ERROR(
        Send(static_cast<int>(k), OutMessage{transport::NewHeader(origin(), pstrain::STATS), {}}));
  }
  std::vector<InMessage> replies;
  PSTRAIN_RETURN_IF_ERROR(
      AwaitFromShards(pstrain::STATS, std::vector<bool>(channels_.size(), true), &replies));
  std::vector<pstrain::ShardStats> stats;
  for (const auto& r : replies) stats.push_back(r.header.stats());
  return stats;
}

Result<GateState> PsClient::SetGate(int64_t gate, bool checkpoint) {
  for (size_t k = 0; k < channels_.size(); ++k) {
    PSTRAIN_RETURN_IF_ERROR(Send(
        static_cast<int>(k), OutMessage{transport::GateHeader(origin(), gate, checkpoint), {}}));
  }
  std::vector<InMessage> replies;
  PSTRAIN_RETURN_IF_ERROR(
      AwaitFromShards(pstrain::GATE_ACK, std::vector<bool>(channels_.size(), true), &replies));
  GateState state{INT64_MAX, INT64_MAX};
  for (const InMessage& r : replies) {
    state.slowest_clock = std::min(state.slowest_clock, r.header.clock());
    state.version = std::min(state.version, r.header.version());
  }
  return state;
}

Result<GateState> PsClient::WaitForClock(int64_t clock, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<pstrain::ShardStats> stats, Stats());
    GateState state{INT64_MAX, INT64_MAX};
    size_t slowest = 0;
    for (size_t k = 0; k < stats.size(); ++k) {
      int64_t shard_min = INT64_MAX;
      for (int64_t c : stats[k].worker_clocks()) shard_min = std::min(shard_min, c);
      if (shard_min < state.slowest_clock) {
        state.slowest_clock = shard_min;
        slowest = k;
      }
      state.version = std::min(state.version, stats[k].version());
    }
    if (state.slowest_clock >= clock) return state;
    if (Clock::now() >= deadline) {
      std::string clocks;
      for (int64_t c : stats[slowest].worker_clocks()) {
        clocks += (clocks.empty() ? "" : ", ") + std::to_string(c);
      }
      return Status::DeadlineExceeded("waited " + SecondsText(timeout) +
                                      " for every worker to reach clock " + std::to_string(clock) +
                                      "; " + ServerName(slowest) + " has worker clocks [" + clocks +
                                      "]");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace pstrain

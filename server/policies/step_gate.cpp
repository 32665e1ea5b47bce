// step_gate (ps-server --step-gate, every mode): a wrapper that answers a pull
// for iteration t only when t < ShardCore::gate, besides what the policy it
// wraps requires. With the gate at G every worker may compute iterations up
// to G - 1 and its pull for G waits; a driver raises G with GATE
// (ShardState::OnGate), which re-checks the deferred pulls at once. It is the
// server side of a driver that runs the job n iterations at a time (issue
// 26's DistributedSolver.step(n)): in ssp and asp the faster workers wait at
// G for the next step instead of running ahead by the staleness bound.
// Pushes are not gated: a worker that pulled iteration G - 1 pushes it.
#include "server/consistency_policy.hpp"

namespace pstrain::server {
namespace {

class StepGatePolicy : public PolicyWrapper {
 public:
  using PolicyWrapper::PolicyWrapper;

  bool PullReady(const DeferredPull& pull) const override {
    return Open(pull.clock) && inner_->PullReady(pull);
  }
  bool ChunkReady(int local, const DeferredPull& pull) const override {
    return Open(pull.clock) && inner_->ChunkReady(local, pull);
  }
  // The checkpoint barrier asks this instead of PullReady: its pull waits too.
  bool StepApplied(int64_t t) const override { return Open(t) && inner_->StepApplied(t); }

 private:
  bool Open(int64_t t) const { return t < core_.gate; }
};

}  // namespace

PSTRAIN_REGISTER_POLICY(PolicyRegistry::Entry{
    .name = "step_gate",
    .rank = 200,  // outermost: the gate holds whatever the inner policies allow
    .wants = [](const ShardConfig& c) { return c.step_gate; },
    .validate = {},
    .base = {},
    .wrapper =
        [](ShardCore& core, std::unique_ptr<ConsistencyPolicy> inner) {
          return std::make_unique<StepGatePolicy>(core, std::move(inner));
        }});

}  // namespace pstrain::server

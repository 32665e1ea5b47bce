// staleness_lr (ssp/asp; Zhang et al. 2016, server/update_methods.hpp): a
// wrapper that multiplies each chunk's scale by StalenessScale(s) =
// 1 / max(1, s), s = version - the version its worker was last served.
#include "server/consistency_policy.hpp"
#include "server/update_methods.hpp"

namespace pstrain::server {
namespace {

class StalenessLrPolicy : public PolicyWrapper {
 public:
  using PolicyWrapper::PolicyWrapper;

  void OnGradient(ChunkGradient& g) override {
    g.scale *=
        StalenessScale(core_.version - core_.workers[static_cast<size_t>(g.worker)].served_version);
    inner_->OnGradient(g);
  }
};

}  // namespace

PSTRAIN_REGISTER_POLICY(PolicyRegistry::Entry{
    .name = "staleness_lr",
    .rank = 100,
    .wants = [](const ShardConfig& c) { return c.methods.staleness_lr; },
    .validate = {},
    .base = {},
    .wrapper =
        [](ShardCore& core, std::unique_ptr<ConsistencyPolicy> inner) {
          return std::make_unique<StalenessLrPolicy>(core, std::move(inner));
        }});

}  // namespace pstrain::server

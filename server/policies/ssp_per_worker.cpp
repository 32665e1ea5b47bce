// ssp_per_worker: ssp with a staleness bound per worker (job key
// consistency.staleness_per_worker: [s_0, s_1, ...], ps-server
// --staleness-per-worker s_0,s_1,...). A pull of worker w for iteration t is
// answered once every clock >= t - s_w: worker w waits exactly when it is more
// than s_w iterations ahead of the slowest worker, so a fast worker can be
// held close to the others while a straggler runs freely (a larger s_w).
// Everything else is ssp (server/policies/arrival.hpp).
#include <string>
#include <vector>

#include "server/policies/arrival.hpp"

namespace pstrain::server {
namespace {

class SspPerWorkerPolicy : public SspPolicy {
 public:
  using SspPolicy::SspPolicy;

 protected:
  int64_t Staleness(int w) const override {
    return core_.config.staleness_per_worker[static_cast<size_t>(w)];
  }
};

Status Validate(const ShardConfig& c) {
  const std::vector<int>& bounds = c.staleness_per_worker;
  if (c.mode != ConsistencyMode::kSsp) {
    return Status::Error("--staleness-per-worker applies to ssp only, the mode is " +
                         std::string(ModeName(c.mode)));
  }
  if (static_cast<int>(bounds.size()) != c.num_workers) {
    return Status::Error("--staleness-per-worker has " + std::to_string(bounds.size()) +
                         " bounds for " + std::to_string(c.num_workers) +
                         " workers (one per worker)");
  }
  for (size_t w = 0; w < bounds.size(); ++w) {
    if (bounds[w] < 0) {
      return Status::Error("--staleness-per-worker: worker " + std::to_string(w) +
                           "'s bound must be >= 0, got " + std::to_string(bounds[w]));
    }
  }
  if (c.methods.elastic) return Status::Error("--staleness-per-worker takes no --elastic");
  return Status::Ok();
}

}  // namespace

PSTRAIN_REGISTER_POLICY(PolicyRegistry::Entry{
    .name = "ssp_per_worker",
    .rank = 10,  // over ssp
    .wants = [](const ShardConfig& c) { return !c.staleness_per_worker.empty(); },
    .validate = Validate,
    .base = [](ShardCore& core) { return std::make_unique<SspPerWorkerPolicy>(core); },
    .wrapper = {}});

}  // namespace pstrain::server

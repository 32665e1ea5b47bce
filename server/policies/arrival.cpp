#include "server/policies/arrival.hpp"

#include "common/optim/update_rule.hpp"

namespace pstrain::server {

std::string ArrivalPolicy::RefusePush(const pstrain::Header& push) const {
  if (core_.config.hyper.clip_gradients >= 0 && !push.has_sum_squares()) {
    return "clip_gradients needs the gradient's sum_squares with every push";
  }
  return "";
}

float ArrivalPolicy::PushScale(const pstrain::Header& push) const {
  const float clip_gradients = core_.config.hyper.clip_gradients;
  return StepScale(clip_gradients >= 0 ? optim::ClipScale(push.sum_squares(), clip_gradients)
                                       : 1.f);
}

void ArrivalPolicy::OnGradient(ChunkGradient& g) {
  ApplyChunkGradient(core_.store(), g, g.scale, static_cast<int>(core_.version));
}

void ArrivalPolicy::WorkerCompleted(int w) {
  core_.RecordStaleness(w);
  ++core_.pushes_applied;
  core_.version = core_.pushes_applied / core_.config.num_workers;
}

bool ArrivalPolicy::ChunkReady(int local, const DeferredPull& pull) const {
  // The worker's own push after_push of this chunk is applied (on arrival).
  const int64_t clock = core_.clocks.clock(pull.worker);
  return clock > pull.after_push || (clock == pull.after_push && core_.arrived(pull.worker, local));
}

}  // namespace pstrain::server

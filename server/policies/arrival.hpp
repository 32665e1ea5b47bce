// Apply on arrival (ssp, asp and what builds on them): every pushed chunk is
// applied as it arrives, scaled by StepScale(clip) = clip / (W * iter_size),
// clip the factor of the push's own sum_squares under clip_gradients.
// version counts global steps: floor(complete pushes applied / W); it is also
// the lr schedule's iter, so a checkpoint cut at iteration t has version t.
//
// A pull is answered whole once BoundHolds. With after_push = a (the worker
// pushed every chunk of iteration a before asking, on its other connection)
// and the bound holding, each chunk goes out as soon as the worker's push a
// of it is applied (clock > a, or clock == a and the chunk arrived), so the
// reply never lacks the worker's own last push.
//
//   ssp  (ssp.cpp)  BoundHolds: every clock >= t - Staleness(worker)
//   asp  (asp.cpp)  BoundHolds: always
#pragma once

#include <string>

#include "server/consistency_policy.hpp"

namespace pstrain::server {

class ArrivalPolicy : public ConsistencyPolicy {
 public:
  explicit ArrivalPolicy(ShardCore& core) : ConsistencyPolicy(core) {}

  std::string RefusePush(const pstrain::Header& push) const override;
  float PushScale(const pstrain::Header& push) const override;
  void OnGradient(ChunkGradient& g) override;
  void WorkerCompleted(int w) override;
  void AfterPush(Out& /*out*/) override {}
  bool PullReady(const DeferredPull& pull) const override { return BoundHolds(pull); }
  bool PullsByChunk(const DeferredPull& pull) const override {
    return pull.after_push >= 0 && BoundHolds(pull);
  }
  bool ChunkReady(int local, const DeferredPull& pull) const override;
  bool StepApplied(int64_t /*t*/) const override { return true; }
  int64_t WaitBound(const DeferredPull& pull) const override { return pull.clock; }
  bool BuffersSteps() const override { return false; }
  int StepGradients() const override { return core_.config.num_workers; }

 protected:
  // The pull's consistency bound holds.
  virtual bool BoundHolds(const DeferredPull& pull) const = 0;
};

class SspPolicy : public ArrivalPolicy {
 public:
  using ArrivalPolicy::ArrivalPolicy;
  int64_t WaitBound(const DeferredPull& pull) const override {
    return pull.clock - Staleness(pull.worker);
  }

 protected:
  bool BoundHolds(const DeferredPull& pull) const override {
    return core_.clocks.min() >= WaitBound(pull);
  }
  // The staleness bound of worker w's pulls.
  virtual int64_t Staleness(int /*w*/) const { return core_.config.staleness; }
};

class AspPolicy : public ArrivalPolicy {
 public:
  using ArrivalPolicy::ArrivalPolicy;

 protected:
  bool BoundHolds(const DeferredPull& /*pull*/) const override { return true; }
};

}  // namespace pstrain::server

// elastic (EASGD, Zhang, Choromanska, LeCun 2015, and periodic model
// averaging; server/update_methods.hpp): a push carries a weight delta, not a
// gradient. The shard adds it to the weights and runs no solver: in bsp the W
// deltas of a step summed in rank order (ElasticBspPolicy), in ssp/asp each
// delta as it arrives (ElasticArrivalPolicy around the mode's policy). No
// clip_gradients: deltas are not clipped.
#include "server/policies/arrival.hpp"
#include "server/policies/bsp.hpp"
#include "server/update_methods.hpp"

namespace pstrain::server {
namespace {

class ElasticBspPolicy : public BspPolicy {
 public:
  using BspPolicy::BspPolicy;

  void OnGradient(ChunkGradient& g) override {
    if (step_->Add(g.local, g.worker, g.encoded)) ChunkComplete(g.id, g.local, g.iteration);
  }

 protected:
  bool Clipping() const override { return false; }
  void LandChunk(uint32_t id, int local, float* sum, int64_t t) override {
    core_.KeepStepStart(id, local, t);
    AddToWeights(core_.store(), id, sum);
    chunk_steps_[static_cast<size_t>(local)] = t + 1;
  }
};

class ElasticArrivalPolicy : public PolicyWrapper {
 public:
  using PolicyWrapper::PolicyWrapper;
  void OnGradient(ChunkGradient& g) override { AddToWeights(core_.store(), g.id, g.Values()); }
};

std::unique_ptr<ConsistencyPolicy> MakeElastic(ShardCore& core) {
  switch (core.config.mode) {
    case ConsistencyMode::kBsp:
      return std::make_unique<ElasticBspPolicy>(core);
    case ConsistencyMode::kSsp:
      return std::make_unique<ElasticArrivalPolicy>(core, std::make_unique<SspPolicy>(core));
    case ConsistencyMode::kAsp:
      break;
  }
  return std::make_unique<ElasticArrivalPolicy>(core, std::make_unique<AspPolicy>(core));
}

}  // namespace

PSTRAIN_REGISTER_POLICY(PolicyRegistry::Entry{
    .name = "elastic",
    .rank = 20,
    .wants = [](const ShardConfig& c) { return c.methods.elastic; },
    .validate = {},
    .base = MakeElastic,
    .wrapper = {}});

}  // namespace pstrain::server

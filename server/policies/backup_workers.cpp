// backup_workers b (bsp; Chen et al. 2016, server/update_methods.hpp): step t
// applies, per chunk, the first W-b gradients of iteration t to arrive
// (BackupStepSum: summed in rank order, scaled by StepScale() = 1/((W-b) *
// iter_size)); later ones, and every push of an iteration < version, are
// acknowledged and dropped (ShardStats.backup_dropped counts chunks). A pull
// for t also waits until the puller's own clock is t (each chunk until it
// pushed that chunk), so its weights never change under its backward. A
// dropped worker keeps its own clock and catches up (its pulls are answered
// at once while version > its clock).
#include <optional>
#include <string>

#include "server/policies/bsp.hpp"
#include "server/update_methods.hpp"

namespace pstrain::server {
namespace {

class BackupWorkersPolicy : public BspPolicy {
 public:
  using BspPolicy::BspPolicy;

  void Install() override {
    const std::vector<int64_t> lengths = ChunkLengths();
    backup_step_.emplace(core_.config.num_workers, StepGradients(), lengths);
    chunk_steps_.assign(lengths.size(), 0);
  }
  std::string RefusePush(const pstrain::Header& push) const override {
    // A late push (step t applied without it) is taken, and dropped.
    return push.clock() < core_.version ? "" : BspPolicy::RefusePush(push);
  }
  void OnGradient(ChunkGradient& g) override {
    if (g.iteration < core_.version) {  // step t is applied: too late
      ++dropped_;
      return;
    }
    switch (backup_step_->Add(g.local, g.worker, g.Values())) {
      case BackupStepSum::Offer::kRefused:
        ++dropped_;
        return;
      case BackupStepSum::Offer::kKept:
        return;
      case BackupStepSum::Offer::kCompleted:
        ChunkComplete(g.id, g.local, g.iteration);
        return;
    }
  }
  bool PullReady(const DeferredPull& pull) const override {
    // The step may be applied before this worker pushed: its weights must not
    // change under its own backward.
    return BspPolicy::PullReady(pull) && core_.clocks.clock(pull.worker) >= pull.clock;
  }
  bool ChunkReady(int local, const DeferredPull& pull) const override {
    if (core_.clocks.clock(pull.worker) < pull.clock && !core_.arrived(pull.worker, local)) {
      return false;  // this worker still has to push the chunk (its backward reads it)
    }
    return BspPolicy::ChunkReady(local, pull);
  }
  int StepGradients() const override {
    return core_.config.num_workers - core_.config.methods.backup_workers;
  }
  void AddStats(pstrain::ShardStats& stats) const override {
    if (dropped_ > 0) stats.set_backup_dropped(dropped_);
  }

 protected:
  float* StepSum(int local) override { return backup_step_->sum(local); }
  void ResetStep() override {
    // The gradients kept were all computed on the weights of this step.
    core_.RecordFresh(StepGradients());
    backup_step_->Reset();
  }

 private:
  std::optional<BackupStepSum> backup_step_;
  int64_t dropped_ = 0;
};

}  // namespace

PSTRAIN_REGISTER_POLICY(PolicyRegistry::Entry{
    .name = "backup_workers",
    .rank = 10,
    .wants =
        [](const ShardConfig& c) {
          return c.mode == ConsistencyMode::kBsp && c.methods.backup_workers > 0;
        },
    .validate = {},
    .base = [](ShardCore& core) { return std::make_unique<BackupWorkersPolicy>(core); },
    .wrapper = {}});

}  // namespace pstrain::server

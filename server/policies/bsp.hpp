// bsp: a step waits for the W gradients of each chunk, sums them in rank order
// (RankOrderedSum: the same floats whatever the arrival order), scales the sum
// by StepScale() = 1/(W*iter_size) and applies it as ONE solver step (iter =
// t); version becomes t+1 once every chunk of step t is applied. A pull for
// t is answered chunk by chunk: each chunk as soon as its step t-1 is applied.
// With clip_gradients >= 0 the step waits for the global norm: each shard
// sends NORM_PARTIAL (the sum of squares of its averaged gradient) to server
// 0, which adds all partials in shard order, sends NORM_TOTAL to every other
// server and applies its own step.
//
// Variants derive from it: backup_workers.cpp (the first W-b gradients of a
// step) and elastic.cpp (the W weight deltas of a step summed and added).
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "server/consistency_policy.hpp"
#include "server/rank_ordered_sum.hpp"

namespace pstrain::server {

class BspPolicy : public ConsistencyPolicy {
 public:
  explicit BspPolicy(ShardCore& core) : ConsistencyPolicy(core) {}

  void Install() override;
  std::string RefusePush(const pstrain::Header& push) const override;
  float PushScale(const pstrain::Header& /*push*/) const override { return 0.f; }
  void OnGradient(ChunkGradient& g) override;
  void WorkerCompleted(int /*w*/) override {}
  void AfterPush(Out& out) override;
  bool PullReady(const DeferredPull& pull) const override { return core_.version >= pull.clock; }
  bool PullsByChunk(const DeferredPull& /*pull*/) const override { return true; }
  bool ChunkReady(int local, const DeferredPull& pull) const override;
  bool StepApplied(int64_t t) const override { return core_.version >= t; }
  int64_t WaitBound(const DeferredPull& pull) const override { return pull.clock; }
  bool BuffersSteps() const override { return true; }
  // The workers a step averages over: the pushers, or the workers behind them
  // (host aggregation: ShardConfig::averaged_workers).
  int StepGradients() const override {
    return core_.config.averaged_workers > 0 ? core_.config.averaged_workers
                                             : core_.config.num_workers;
  }
  bool ExchangesNorms() const override { return Clipping(); }
  void OnNormPartial(int shard, int64_t clock, double sum_squares, Out& out) override;
  void OnNormTotal(int64_t clock, double total) override { NormTotalKnown(clock, total); }

 protected:
  // clip_gradients is on and the step honours it (the global norm exchange).
  virtual bool Clipping() const { return core_.config.hyper.clip_gradients >= 0; }
  // The sums of the step's chunk `local` (complete chunks only).
  virtual float* StepSum(int local) { return step_->sum(local); }
  // After a step: counts its pushes' staleness and empties the sums.
  virtual void ResetStep();
  // Chunk `local` of step t has all its gradients in StepSum(local): it is
  // applied now, or with clipping once the norm total is known.
  void ChunkComplete(uint32_t id, int local, int64_t t);
  // Applies the complete sum of chunk `local` of step t (ahead of the rest).
  virtual void LandChunk(uint32_t id, int local, float* sum, int64_t t);
  std::vector<int64_t> ChunkLengths() const;

  std::optional<RankOrderedSum> step_;  // the sums of step core_.version
  // Per local chunk: version + 1 once its step is applied ahead of the rest;
  // at most version otherwise (a chunk's version is the max of both).
  std::vector<int64_t> chunk_steps_;
  int step_chunks_complete_ = 0;  // chunks of step version with every gradient

 private:
  // Every chunk of the step is complete: this shard's part of the norm.
  void Aggregated(Out& out);
  void NotePartial(int shard, int64_t clock, double sum_squares, Out& out);
  void NormTotalKnown(int64_t clock, double total);
  void ApplyStep(double global_sum_squares);
  void FinishStep();

  std::map<int64_t, std::vector<std::optional<double>>> norm_partials_;  // server 0: [clock][shard]
  std::optional<std::pair<int64_t, double>> norm_total_;  // received before the own sums were done
};

}  // namespace pstrain::server

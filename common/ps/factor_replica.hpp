// FactorReplica: a worker's copy of the fc weights it receives as sufficient
// factors instead of dense values (sufficient-factor broadcasting, Poseidon;
// docs/architecture.md, "Sufficient factors"), with the update rule's
// history, stepped exactly as the shards step their own copies.
//
// In bsp every shard turns each worker's factors of step t into the chunk's
// gradient (FactorRebuild, common/ps/factor_rebuild.hpp), sums the W
// gradients in rank order, scales the sum by AveragingScale
// (common/ps/averaging.hpp) and applies one step of the solver's UpdateRule
// with iter = t. The replica does the same per chunk, with the same functions
// on the same inputs: the rebuild per (shard, worker) with that shard's chunk
// list and row span (so each chunk is the same GEMM of the same shape), the
// sum g_0 + g_1 + ... + g_{W-1} in rank order (RankOrderedSum's float
// operations: the first copied, each next added value by value), the scale
// and iteration the shard sends, and optim::UpdateRule::Apply with
// LearningRate(hyper, iter) and the parameter's lr_mult/decay_mult
// (ChunkStore::ApplyGradientInPlace's inputs). Every rule is element-wise, so
// the shard splitting a chunk over threads gives the same floats. The replica
// is therefore bit-identical to the shards for as long as it started
// identical (SetWeights/SetHistory from a dense pull) and saw every step.
//
// Not thread-safe: one thread (the worker's training loop) uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/optim/solver_hyper.hpp"
#include "common/optim/step.hpp"
#include "common/optim/update_rule.hpp"
#include "common/ps/factor_rebuild.hpp"
#include "common/ps/key_placement.hpp"
#include "common/status.hpp"

namespace pstrain {

// One broadcast weight: PS parameter `param`, a rows x cols matrix (row-major,
// the layout the factors' product has: common/ps/sufficient_factors.hpp).
struct BroadcastWeight {
  int param = 0;
  int64_t cols = 0;
};

// One worker's factors of one step for the chunks of one weight on one shard,
// as that worker pushed them there: left is samples x (span.end - span.begin)
// (L's columns of the rows SpanRows of those chunks touches), right is
// samples x cols (all of R).
struct WorkerFactors {
  int64_t samples = 0;
  const float* left = nullptr;
  const float* right = nullptr;
};

// One step of one weight's chunks on one shard: what the shard applied.
struct ShardFactorStep {
  int param = 0;
  int shard = 0;
  int iter = 0;        // the step's iteration t (the lr schedule's)
  float scale = 1.f;   // the shard's AveragingScale of the step
  std::vector<WorkerFactors> workers;  // by rank, every worker
};

class FactorReplica {
 public:
  // The replica of `weights` (each a parameter of `placement` whose size is a
  // whole number of rows of `cols`), weights and history zero. param_hyper:
  // every parameter's lr_mult/decay_mult, in parameter order.
  // Errors: an invalid hyper (MakeUpdateRule's), a param_hyper count other
  // than placement.num_params(), a weight out of range, repeated, or not a
  // whole number of rows; num_workers < 1.
  static Result<FactorReplica> Create(const KeyPlacement& placement,
                                      const std::vector<BroadcastWeight>& weights,
                                      const std::vector<optim::ParamHyper>& param_hyper,
                                      const optim::SolverHyper& hyper, int num_workers);

  FactorReplica(FactorReplica&&) = default;
  FactorReplica& operator=(FactorReplica&&) = default;
  FactorReplica(const FactorReplica&) = delete;
  FactorReplica& operator=(const FactorReplica&) = delete;

  // Chunk `id` belongs to a broadcast weight.
  bool Holds(uint32_t id) const { return id < local_.size() && local_[id] >= 0; }
  // Parameter `param` is a broadcast weight.
  bool Broadcast(int param) const;
  int history_slots() const { return history_slots_; }
  int num_workers() const { return num_workers_; }
  const std::vector<BroadcastWeight>& weights() const { return weights_; }

  // REQUIRES (all below): Holds(id); 0 <= k < history_slots(); values has the chunk's length.
  std::span<const float> weights(uint32_t id) const;
  std::span<const float> history(uint32_t id, int k) const;
  void SetWeights(uint32_t id, std::span<const float> values);
  void SetHistory(uint32_t id, int k, std::span<const float> values);

  // Applies one shard's step of one broadcast weight to the chunks of
  // step.param held by step.shard. Errors (nothing changes): the parameter
  // is not broadcast or has no chunk on that shard, a worker count other than
  // num_workers(), a worker with no samples or a null factor.
  Status Apply(const ShardFactorStep& step);

 private:
  struct Slot {
    uint32_t id = 0;
    int64_t length = 0;
    optim::ParamHyper param;
    std::vector<float> data;
    std::vector<std::vector<float>> history;
    std::vector<float> sum;  // the step's rank-ordered sum (the rule's scratch)
  };
  FactorReplica() = default;
  Slot& slot(uint32_t id) { return slots_[static_cast<size_t>(local_[id])]; }
  const Slot& slot(uint32_t id) const { return slots_[static_cast<size_t>(local_[id])]; }
  const BroadcastWeight* Find(int param) const;

  KeyPlacement placement_;
  optim::SolverHyper hyper_;
  std::unique_ptr<optim::UpdateRule> rule_;
  int history_slots_ = 0;
  int num_workers_ = 0;
  std::vector<BroadcastWeight> weights_;
  std::vector<int> local_;  // global chunk id -> index into slots_, or -1
  std::vector<Slot> slots_;
  FactorRebuild rebuild_;
  std::vector<float*> rebuilt_;  // Rebuild's per-chunk pointers
};

}  // namespace pstrain

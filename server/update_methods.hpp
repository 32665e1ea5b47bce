// Research update methods a shard can apply on top of its solver (one job key
// each; docs/config-reference.md gives the paper and formula of each):
//
//   backup_workers b   bsp (Chen et al. 2016): a step takes the first W-b
//                      gradients of each chunk to arrive, sums them in rank
//                      order and divides by W-b; the rest are dropped, counted
//                      (BackupStepSum, ShardStats.backup_dropped).
//   staleness_lr       ssp/asp (Zhang et al. 2016): a gradient of staleness s
//                      (versions applied since its worker was served) is scaled
//                      by StalenessScale(s) = 1 / max(1, s).
//   dc_lambda          ssp/asp (DC-ASGD, Zheng et al. 2017): the gradient g of a
//                      worker that was served weights w_pulled becomes
//                      g + lambda * g * g * (w_now - w_pulled), elementwise;
//                      with dc_adaptive, lambda_i = dc_lambda / (sqrt(ms_i) + eps)
//                      where ms = m * ms + (1 - m) * g * g (per value, per shard).
//   elastic            EASGD (Zhang, Choromanska, LeCun 2015) and periodic model
//                      averaging: a push carries a weight delta, not a gradient;
//                      the shard adds it to the weights (bsp: the W deltas of a
//                      step summed in rank order) and runs no solver.
// The functions are pure; ShardState keeps the state (served weights, ms).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/ps/consistency_mode.hpp"
#include "common/status.hpp"
#include "server/chunk_store.hpp"

namespace pstrain::server {

struct UpdateMethods {
  int backup_workers = 0;     // bsp only; 0 <= b < num_workers
  bool staleness_lr = false;  // ssp/asp only
  float dc_lambda = 0.f;      // ssp/asp only; 0: no delay compensation
  bool dc_adaptive = false;   // DC-ASGD-a: lambda scaled by 1/sqrt(mean square of g)
  float dc_momentum = 0.95f;  // m of the mean square, in [0, 1)
  float dc_epsilon = 1e-7f;   // > 0
  bool elastic = false;       // pushes are weight deltas, added as they are
  bool delay_compensation() const { return dc_lambda > 0.f; }
};

// Ok when `methods` can run in `mode` with `num_workers` workers; otherwise
// the offending option (named as its ps-server flag), its value and why.
Status ValidateUpdateMethods(const UpdateMethods& methods, ConsistencyMode mode, int num_workers);

// weights(id) += delta[0..length(id)) (an elastic push).
void AddToWeights(ChunkStore& store, uint32_t id, const float* delta);

// 1 / max(1, staleness).
float StalenessScale(int64_t staleness);

// grad[i] += lambda * grad[i]^2 * (w_now[i] - w_pulled[i]) for i < n.
void DelayCompensate(float* grad, const float* w_now, const float* w_pulled, size_t n,
                     float lambda);

// The adaptive variant: first mean_square[i] = m * mean_square[i] + (1 - m) * grad[i]^2,
// then grad[i] += lambda0 / (sqrt(mean_square[i]) + eps) * grad[i]^2 * (w_now[i] - w_pulled[i]).
void DelayCompensateAdaptive(float* grad, const float* w_now, const float* w_pulled,
                             float* mean_square, size_t n, float lambda0, float m, float eps);

// One bsp step's sums with backup workers: per chunk, the first `needed`
// gradients offered are kept (copied), later ones refused; when the last one
// needed arrives they are added in rank order (so the sum depends only on
// which ranks arrived first, not on the order among them). Buffers are kept
// across steps (Reset).
class BackupStepSum {
 public:
  enum class Offer { kKept, kCompleted, kRefused };
  // `lengths`: values of each chunk (local index order). REQUIRES: 1 <= needed <= num_workers.
  BackupStepSum(int num_workers, int needed, const std::vector<int64_t>& lengths);

  // Worker `rank`'s gradient of chunk `c` (copied before returning).
  // REQUIRES: rank not yet offered to c since Reset().
  Offer Add(int c, int rank, const float* grad);
  bool complete(int c) const { return chunks_[static_cast<size_t>(c)].kept == needed_; }
  // REQUIRES: complete(c). The caller may overwrite it (until Reset()).
  float* sum(int c) { return chunks_[static_cast<size_t>(c)].acc.data(); }
  int64_t length(int c) const {
    return static_cast<int64_t>(chunks_[static_cast<size_t>(c)].acc.size());
  }
  int needed() const { return needed_; }
  // The ranks kept for chunk c, ascending (complete chunks only).
  std::vector<int> kept_ranks(int c) const;
  void Reset();

 private:
  struct PerChunk {
    std::vector<float> acc;
    std::vector<std::vector<float>> by_rank;
    std::vector<char> has;
    int kept = 0;
  };
  int needed_;
  std::vector<PerChunk> chunks_;
};

}  // namespace pstrain::server

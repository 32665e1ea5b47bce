#include "server/update_methods.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>

namespace pstrain::server {

Status ValidateUpdateMethods(const UpdateMethods& m, ConsistencyMode mode, int num_workers) {
  const bool bsp = mode == ConsistencyMode::kBsp;
  if (m.backup_workers < 0 || m.backup_workers >= num_workers) {
    return Status::Error("--backup-workers must be in [0, " + std::to_string(num_workers) +
                         ") (fewer than the " + std::to_string(num_workers) + " workers), got " +
                         std::to_string(m.backup_workers));
  }
  if (m.backup_workers > 0 && !bsp) {
    return Status::Error("--backup-workers applies to bsp only, the mode is " +
                         std::string(ModeName(mode)));
  }
  if (m.staleness_lr && bsp) {
    return Status::Error(
        "--staleness-lr applies to ssp and asp only (bsp gradients are never stale)");
  }
  if (!(m.dc_lambda >= 0.f) || !std::isfinite(m.dc_lambda)) {
    return Status::Error("--dc-lambda must be a finite number >= 0, got " +
                         std::to_string(m.dc_lambda));
  }
  if (m.dc_lambda > 0.f && bsp) {
    return Status::Error("--dc-lambda applies to ssp and asp only (bsp gradients are never stale)");
  }
  if (!(m.dc_momentum >= 0.f && m.dc_momentum < 1.f)) {
    return Status::Error("--dc-momentum must be in [0, 1), got " + std::to_string(m.dc_momentum));
  }
  if (!(m.dc_epsilon > 0.f) || !std::isfinite(m.dc_epsilon)) {
    return Status::Error("--dc-epsilon must be a finite number > 0, got " +
                         std::to_string(m.dc_epsilon));
  }
  if (m.elastic && (m.backup_workers > 0 || m.staleness_lr || m.dc_lambda > 0.f)) {
    return Status::Error(
        "--elastic (EASGD, model averaging) takes no --backup-workers, --staleness-lr or "
        "--dc-lambda");
  }
  return Status::Ok();
}

void AddToWeights(ChunkStore& store, uint32_t id, const float* delta) {
  const std::span<const float> now = store.weights(id);
  std::vector<float> sum(now.begin(), now.end());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] += delta[i];
  store.SetWeights(id, sum);
}

float StalenessScale(int64_t staleness) {
  return 1.f / static_cast<float>(std::max<int64_t>(1, staleness));
}

void DelayCompensate(float* grad, const float* w_now, const float* w_pulled, size_t n,
                     float lambda) {
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i];
    grad[i] = g + lambda * g * g * (w_now[i] - w_pulled[i]);
  }
}

void DelayCompensateAdaptive(float* grad, const float* w_now, const float* w_pulled,
                             float* mean_square, size_t n, float lambda0, float m, float eps) {
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i];
    mean_square[i] = m * mean_square[i] + (1.f - m) * g * g;
    const float lambda = lambda0 / (std::sqrt(mean_square[i]) + eps);
    grad[i] = g + lambda * g * g * (w_now[i] - w_pulled[i]);
  }
}

BackupStepSum::BackupStepSum(int num_workers, int needed, const std::vector<int64_t>& lengths)
    : needed_(needed), chunks_(lengths.size()) {
  PSTRAIN_CHECK(needed >= 1 && needed <= num_workers);
  for (size_t c = 0; c < lengths.size(); ++c) {
    chunks_[c].acc.assign(static_cast<size_t>(lengths[c]), 0.f);
    chunks_[c].by_rank.resize(static_cast<size_t>(num_workers));
    chunks_[c].has.assign(static_cast<size_t>(num_workers), 0);
  }
}

BackupStepSum::Offer BackupStepSum::Add(int c, int rank, const float* grad) {
  PerChunk& chunk = chunks_[static_cast<size_t>(c)];
  const size_t r = static_cast<size_t>(rank);
  PSTRAIN_CHECK(!chunk.has[r]);
  if (chunk.kept == needed_) return Offer::kRefused;
  chunk.by_rank[r].assign(grad, grad + chunk.acc.size());
  chunk.has[r] = 1;
  if (++chunk.kept < needed_) return Offer::kKept;
  bool first = true;
  for (size_t k = 0; k < chunk.has.size(); ++k) {
    if (!chunk.has[k]) continue;
    const std::vector<float>& g = chunk.by_rank[k];
    if (first) {
      std::memcpy(chunk.acc.data(), g.data(), g.size() * sizeof(float));
      first = false;
    } else {
      for (size_t i = 0; i < g.size(); ++i) chunk.acc[i] += g[i];
    }
  }
  return Offer::kCompleted;
}

std::vector<int> BackupStepSum::kept_ranks(int c) const {
  std::vector<int> ranks;
  const PerChunk& chunk = chunks_[static_cast<size_t>(c)];
  for (size_t k = 0; k < chunk.has.size(); ++k) {
    if (chunk.has[k]) ranks.push_back(static_cast<int>(k));
  }
  return ranks;
}

void BackupStepSum::Reset() {
  for (PerChunk& chunk : chunks_) {
    chunk.kept = 0;
    std::fill(chunk.has.begin(), chunk.has.end(), 0);
  }
}

}  // namespace pstrain::server

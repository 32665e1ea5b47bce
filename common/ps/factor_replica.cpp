#include "common/ps/factor_replica.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/optim/lr_policy.hpp"
#include "common/ps/sufficient_factors.hpp"

namespace pstrain {

Result<FactorReplica> FactorReplica::Create(const KeyPlacement& placement,
                                            const std::vector<BroadcastWeight>& weights,
                                            const std::vector<optim::ParamHyper>& param_hyper,
                                            const optim::SolverHyper& hyper, int num_workers) {
  if (static_cast<int>(param_hyper.size()) != placement.num_params()) {
    return Status::Error("FactorReplica: " + std::to_string(param_hyper.size()) +
                         " parameter multipliers for " + std::to_string(placement.num_params()) +
                         " parameters");
  }
  if (num_workers < 1) {
    return Status::Error("FactorReplica: " + std::to_string(num_workers) + " workers");
  }
  PSTRAIN_ASSIGN_OR_RETURN(auto rule, optim::MakeUpdateRule(hyper));
  FactorReplica replica;
  replica.placement_ = placement;
  replica.hyper_ = hyper;
  replica.history_slots_ = rule->history_slots();
  replica.rule_ = std::move(rule);
  replica.num_workers_ = num_workers;
  replica.local_.assign(placement.chunks().size(), -1);
  for (const BroadcastWeight& w : weights) {
    if (w.param < 0 || w.param >= placement.num_params()) {
      return Status::Error("FactorReplica: parameter " + std::to_string(w.param) + " of " +
                           std::to_string(placement.num_params()));
    }
    const int64_t size = ParamSize(placement, w.param);
    if (w.cols < 1 || size == 0 || size % w.cols != 0) {
      return Status::Error("FactorReplica: parameter " + std::to_string(w.param) + " has " +
                           std::to_string(size) + " values, not whole rows of " +
                           std::to_string(w.cols));
    }
    if (replica.Find(w.param) != nullptr) {
      return Status::Error("FactorReplica: parameter " + std::to_string(w.param) + " twice");
    }
    replica.weights_.push_back(w);
    for (uint32_t id : placement.param_chunks(w.param)) {
      const Chunk& c = placement.chunk(id);
      replica.local_[id] = static_cast<int>(replica.slots_.size());
      Slot s;
      s.id = id;
      s.length = c.length;
      s.param = param_hyper[static_cast<size_t>(w.param)];
      s.data.assign(static_cast<size_t>(c.length), 0.f);
      s.history.assign(static_cast<size_t>(replica.history_slots_),
                       std::vector<float>(static_cast<size_t>(c.length), 0.f));
      s.sum.assign(static_cast<size_t>(c.length), 0.f);
      replica.slots_.push_back(std::move(s));
    }
  }
  return replica;
}

const BroadcastWeight* FactorReplica::Find(int param) const {
  for (const BroadcastWeight& w : weights_) {
    if (w.param == param) return &w;
  }
  return nullptr;
}

bool FactorReplica::Broadcast(int param) const { return Find(param) != nullptr; }

std::span<const float> FactorReplica::weights(uint32_t id) const { return slot(id).data; }

std::span<const float> FactorReplica::history(uint32_t id, int k) const {
  return slot(id).history[static_cast<size_t>(k)];
}

void FactorReplica::SetWeights(uint32_t id, std::span<const float> values) {
  Slot& s = slot(id);
  PSTRAIN_CHECK(static_cast<int64_t>(values.size()) == s.length);
  std::copy(values.begin(), values.end(), s.data.begin());
}

void FactorReplica::SetHistory(uint32_t id, int k, std::span<const float> values) {
  Slot& s = slot(id);
  PSTRAIN_CHECK(static_cast<int64_t>(values.size()) == s.length);
  std::vector<float>& h = s.history[static_cast<size_t>(k)];
  std::copy(values.begin(), values.end(), h.begin());
}

Status FactorReplica::Apply(const ShardFactorStep& step) {
  const BroadcastWeight* weight = Find(step.param);
  if (weight == nullptr) {
    return Status::Error("parameter " + std::to_string(step.param) + " is not broadcast");
  }
  // The chunks of the weight on that shard, ascending: the push's chunk list.
  pstrain::Header h;
  std::vector<uint32_t> ids;
  for (uint32_t id : placement_.param_chunks(step.param)) {
    if (placement_.chunk(id).shard != step.shard) continue;
    ids.push_back(id);
    pstrain::ChunkRef* ref = h.add_chunks();
    ref->set_id(id);
    ref->set_length(static_cast<uint64_t>(placement_.chunk(id).length));
  }
  if (ids.empty()) {
    return Status::Error("parameter " + std::to_string(step.param) + " has no chunk on server " +
                         std::to_string(step.shard));
  }
  if (static_cast<int>(step.workers.size()) != num_workers_) {
    return Status::Error("factors of " + std::to_string(step.workers.size()) + " workers, " +
                         std::to_string(num_workers_) + " expected");
  }
  for (size_t r = 0; r < step.workers.size(); ++r) {
    const WorkerFactors& f = step.workers[r];
    if (f.samples < 1 || f.left == nullptr || f.right == nullptr) {
      return Status::Error("worker " + std::to_string(r) + "'s factors are missing (" +
                           std::to_string(f.samples) + " samples)");
    }
  }
  const WeightRows span = SpanRows(placement_, ids, weight->cols);
  pstrain::FactorShape* shape = h.mutable_factors();
  shape->set_row_begin(static_cast<uint32_t>(span.begin));
  shape->set_row_end(static_cast<uint32_t>(span.end));
  shape->set_cols(static_cast<uint32_t>(weight->cols));
  // The rank-ordered sum, as RankOrderedSum forms it: g_0 copied, then each
  // next rank's values added one by one.
  for (size_t r = 0; r < step.workers.size(); ++r) {
    const WorkerFactors& f = step.workers[r];
    shape->set_samples(static_cast<uint32_t>(f.samples));
    rebuild_.Rebuild(h, f.left, f.right, placement_, &rebuilt_);
    for (size_t i = 0; i < ids.size(); ++i) {
      Slot& s = slot(ids[i]);
      const float* g = rebuilt_[i];
      if (r == 0) {
        std::memcpy(s.sum.data(), g, static_cast<size_t>(s.length) * sizeof(float));
      } else {
        float* acc = s.sum.data();
        for (int64_t k = 0; k < s.length; ++k) acc[k] += g[k];
      }
    }
  }
  // The step, as ChunkStore::ApplyGradientInPlace runs it.
  const optim::StepInputs in{optim::LearningRate(hyper_, step.iter), step.iter, step.scale,
                             /*diff_holds_update=*/false};
  constexpr size_t kMaxSlots = 4;
  PSTRAIN_CHECK(static_cast<size_t>(history_slots_) <= kMaxSlots);
  for (uint32_t id : ids) {
    Slot& s = slot(id);
    float* history[kMaxSlots];
    for (size_t k = 0; k < s.history.size(); ++k) history[k] = s.history[k].data();
    rule_->Apply(in, s.param,
                 optim::ParamSlice{s.data.data(), s.sum.data(),
                                   std::span<float* const>(history, s.history.size()),
                                   static_cast<size_t>(s.length)});
  }
  return Status::Ok();
}

}  // namespace pstrain

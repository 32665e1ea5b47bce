#include "worker/ps/factor_broadcast.hpp"

#include <algorithm>
#include <cstring>

#include "common/ps/factor_relay.hpp"
#include "common/ps/sufficient_factors.hpp"

namespace pstrain {

Result<std::unique_ptr<FactorBroadcast>> FactorBroadcast::Create(
    const KeyPlacement& placement, std::vector<Weight> weights,
    const std::vector<optim::ParamHyper>& param_hyper, const optim::SolverHyper& hyper,
    FactorBroadcastOptions options) {
  std::vector<BroadcastWeight> shapes;
  for (const Weight& w : weights) shapes.push_back({w.param, w.cols});
  PSTRAIN_ASSIGN_OR_RETURN(
      FactorReplica replica,
      FactorReplica::Create(placement, shapes, param_hyper, hyper, options.num_workers));
  std::unique_ptr<FactorBroadcast> b(
      new FactorBroadcast(std::move(replica), std::move(weights), std::move(options)));
  b->placement_ = placement;
  b->rights_.resize(b->weights_.size());
  return b;
}

void FactorBroadcast::BeginPull(int64_t clock) {
  clock_ = clock;
  relay_ = clock > 0 && synced_ == clock - 1;
  dense_ = !relay_ || (options_.verify_interval > 0 && clock % options_.verify_interval == 0);
  relays_.clear();
  for (auto& r : rights_) r.assign(static_cast<size_t>(options_.num_workers), {});
  dense_weights_.clear();
  dense_history_.clear();
}

void FactorBroadcast::AddToPull(pstrain::Header* pull) const {
  for (const Weight& w : weights_) {
    if (relay_) pull->add_broadcast(static_cast<uint32_t>(w.param));
    if (dense_) pull->add_history_params(static_cast<uint32_t>(w.param));
    // Every pull, not only those that take factors: the R's are also
    // forwarded (a restarted worker's first pull included).
    if (options_.rights_ahead && clock_ >= 1) {
      pull->add_rights_ahead(static_cast<uint32_t>(w.param));
    }
  }
}

Result<size_t> FactorBroadcast::WeightIndex(int param, uint32_t cols, const std::string& what,
                                            const std::string& what_rows) const {
  auto weight = std::find_if(weights_.begin(), weights_.end(),
                             [&](const Weight& w) { return w.param == param; });
  if (weight == weights_.end()) {
    return Status::InvalidArgument(what + ", which this worker does not broadcast");
  }
  if (cols != static_cast<uint32_t>(weight->cols)) {
    return Status::InvalidArgument(what_rows + " with rows of " + std::to_string(cols) +
                                   ", its rows have " + std::to_string(weight->cols));
  }
  return static_cast<size_t>(weight - weights_.begin());
}

Status FactorBroadcast::AcceptRight(const std::string& server, const transport::InMessage& right) {
  const pstrain::FactorRight& r = right.header.right();
  if (!relay_ || right.header.clock() != clock_ - 1) return Status::Ok();
  const std::string of = " R of parameter " + std::to_string(r.param());
  PSTRAIN_ASSIGN_OR_RETURN(const size_t weight,
                           WeightIndex(static_cast<int>(r.param()), r.cols(),
                                       server + " sent the" + of, server + " sent an" + of));
  std::vector<float>& values = rights_[weight][r.worker()];
  const size_t count = static_cast<size_t>(r.samples()) * r.cols();
  const float* v = DecodeFactors(r.dtype(), right.payload(0), count, &values);
  if (v != values.data()) values.assign(v, v + count);
  return Status::Ok();
}

Status FactorBroadcast::Accept(int shard, const std::string& server,
                               const transport::InMessage& reply) {
  const pstrain::Header& h = reply.header;
  if (h.relay_size() > 0 && !relay_) {
    return Status::InvalidArgument(server + " sent factors this pull did not ask for");
  }
  if (h.history_chunks_size() > 0 && !dense_) {
    return Status::InvalidArgument(server + " sent history this pull did not ask for");
  }
  // Weights of broadcast chunks (a start or a verification): kept to compare or start from.
  for (int i = 0; i < h.chunks_size(); ++i) {
    const uint32_t id = h.chunks(i).id();
    if (!replica_.Holds(id)) continue;
    if (!dense_) {
      return Status::InvalidArgument(server + " sent chunk " + std::to_string(id) +
                                     " of a broadcast weight as values, this pull asked for "
                                     "its factors");
    }
    const float* v = reply.payload(static_cast<size_t>(i));
    dense_weights_.emplace_back(id, std::vector<float>(v, v + h.chunks(i).length()));
  }
  size_t frame = static_cast<size_t>(h.chunks_size());
  for (uint32_t k = 0; k < h.history_slots(); ++k) {
    for (uint32_t id : h.history_chunks()) {
      const float* v = reply.payload(frame++);
      if (!replica_.Holds(id)) continue;
      if (static_cast<int>(k) >= replica_.history_slots()) {
        return Status::InvalidArgument(server + " sent " + std::to_string(h.history_slots()) +
                                       " history slots, this solver keeps " +
                                       std::to_string(replica_.history_slots()));
      }
      dense_history_.push_back({{id, static_cast<int>(k)},
                                std::vector<float>(v, v + placement_.chunk(id).length)});
    }
  }
  for (const pstrain::RelayedFactors& r : h.relay()) {
    const int param = static_cast<int>(r.param());
    const std::string relayed = server + " relayed parameter " + std::to_string(param);
    PSTRAIN_ASSIGN_OR_RETURN(const size_t weight,
                             WeightIndex(param, r.cols(), relayed, relayed));
    auto relay = std::find_if(relays_.begin(), relays_.end(), [&](const ShardRelay& s) {
      return s.param == param && s.shard == shard;
    });
    if (relay == relays_.end()) {
      relays_.push_back({param, shard, h.relay_scale(),
                         std::vector<std::vector<float>>(
                             static_cast<size_t>(options_.num_workers))});
      relay = relays_.end() - 1;
    }
    // The frames as the worker pushed them (float32 or 16-bit, r.dtype()),
    // decoded exactly as the shard decoded them before its rebuild.
    const int64_t width =
        SpanRows(placement_, ParamChunksOn(placement_, param, shard), r.cols()).count();
    std::vector<float>& left = relay->left[r.worker()];
    const size_t left_count = static_cast<size_t>(r.samples() * width);
    const float* l = DecodeFactors(r.dtype(), reply.payload(frame), left_count, &left);
    if (l != left.data()) left.assign(l, l + left_count);
    ++frame;
    if (r.right()) {
      std::vector<float>& right = rights_[weight][r.worker()];
      const size_t right_count = static_cast<size_t>(r.samples()) * r.cols();
      const float* v = DecodeFactors(r.dtype(), reply.payload(frame), right_count, &right);
      if (v != right.data()) right.assign(v, v + right_count);
      ++frame;
    }
  }
  return Status::Ok();
}

Status FactorBroadcast::Finish() {
  if (relay_) {
    // Every (weight, shard) holding chunks of it must have relayed.
    for (size_t i = 0; i < weights_.size(); ++i) {
      const int param = weights_[i].param;
      for (int shard : ParamShards(placement_, param)) {
        auto relay = std::find_if(relays_.begin(), relays_.end(), [&](const ShardRelay& s) {
          return s.param == param && s.shard == shard;
        });
        if (relay == relays_.end()) {
          return Status::InvalidArgument("server " + std::to_string(shard) +
                                         " relayed no factors of parameter " +
                                         std::to_string(param));
        }
        ShardFactorStep step;
        step.param = param;
        step.shard = shard;
        step.iter = static_cast<int>(clock_ - 1);
        step.scale = relay->scale;
        for (int w = 0; w < options_.num_workers; ++w) {
          const std::vector<float>& right = rights_[i][static_cast<size_t>(w)];
          const std::vector<float>& left = relay->left[static_cast<size_t>(w)];
          if (right.empty()) {
            return Status::InvalidArgument(
                "server " + std::to_string(RelayHolder(placement_, param, w)) +
                " relayed no R of worker " + std::to_string(w) + " for parameter " +
                std::to_string(param));
          }
          const int64_t samples = static_cast<int64_t>(right.size()) / weights_[i].cols;
          step.workers.push_back({samples, left.data(), right.data()});
        }
        PSTRAIN_RETURN_IF_ERROR(
            replica_.Apply(step).WithContext("server " + std::to_string(shard) + "'s relay"));
      }
    }
  }
  if (dense_) {
    if (dense_weights_.size() != static_cast<size_t>(std::count_if(
                                     placement_.chunks().begin(), placement_.chunks().end(),
                                     [&](const Chunk& c) { return replica_.Holds(c.id); }))) {
      return Status::InvalidArgument("the pull brought " + std::to_string(dense_weights_.size()) +
                                     " chunks of the broadcast weights, not all of them");
    }
    int64_t differ = 0;
    int64_t compared = 0;
    for (const auto& [id, values] : dense_weights_) {
      if (relay_) {
        const auto mine = replica_.weights(id);
        for (size_t i = 0; i < values.size(); ++i) {
          differ += std::memcmp(&mine[i], &values[i], sizeof(float)) != 0 ? 1 : 0;
        }
        compared += static_cast<int64_t>(values.size());
      }
      replica_.SetWeights(id, values);
    }
    for (const auto& [key, values] : dense_history_) {
      if (relay_) {
        const auto mine = replica_.history(key.first, key.second);
        for (size_t i = 0; i < values.size(); ++i) {
          differ += std::memcmp(&mine[i], &values[i], sizeof(float)) != 0 ? 1 : 0;
        }
        compared += static_cast<int64_t>(values.size());
      }
      replica_.SetHistory(key.first, key.second, values);
    }
    if (relay_) {
      ++verifications_;
      mismatches_ += differ;
      if (differ > 0) {
        const std::string what = "factor broadcast: the replica differs from the shards in " +
                                 std::to_string(differ) + " of " + std::to_string(compared) +
                                 " values (weights and history) at iteration " +
                                 std::to_string(clock_);
        if (options_.strict) return Status::Error(what);
        if (options_.on_notice) options_.on_notice(what + "; the shards' values replace them");
      }
    }
  }
  // The blobs get the replica's values (the same as the shards' when dense).
  for (const Weight& w : weights_) {
    float* data = w.blob->mutable_cpu_data();
    for (uint32_t id : placement_.param_chunks(w.param)) {
      const Chunk& c = placement_.chunk(id);
      const auto values = replica_.weights(id);
      std::memcpy(data + c.offset, values.data(), values.size() * sizeof(float));
    }
  }
  synced_ = clock_;
  return Status::Ok();
}

}  // namespace pstrain

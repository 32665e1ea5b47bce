// ShardServer: PUSH (bsp aggregation, ssp/asp apply-on-arrival) and the
// global gradient norm exchange for clip_gradients.
#include <span>

#include "server/shard_server.hpp"

namespace pstrain::server {

void ShardServer::OnPush(const Incoming& m, Out& out) {
  const pstrain::Header& h = m.header;
  if (!initialized()) {
    Reject(m, "push before the init push", out);
    return;
  }
  ChunkStore& store = *layout_.store;
  const int w = h.sender();
  const int64_t t = h.clock();
  const int64_t clock = clocks_.clock(w);
  if (t > clock) {
    Reject(m,
           "pushed iteration " + std::to_string(t) + " but the worker's clock is " +
               std::to_string(clock),
           out);
    return;
  }
  if (t < clock) {  // a resend of an iteration already complete here
    duplicates_dropped_ += h.chunks_size();
    Log("worker " + std::to_string(w) + "'s push of iteration " + std::to_string(t) +
        " dropped: that iteration is complete (clock " + std::to_string(clock) + ")");
    out.push_back(Reply(m, pstrain::PUSH_ACK));
    return;
  }
  const bool bsp = config_.mode == ConsistencyMode::kBsp;
  const bool clipping = config_.hyper.clip_gradients >= 0;
  const bool backups = bsp && backup_step_.has_value();
  if (bsp && t != version_ && !(backups && t < version_)) {
    Reject(m,
           "pushed iteration " + std::to_string(t) + " before step " + std::to_string(t - 1) +
               " was applied (version " + std::to_string(version_) + ")",
           out);
    return;
  }
  if (!bsp && clipping && !h.has_sum_squares()) {
    Reject(m, "clip_gradients needs the gradient's sum_squares with every push", out);
    return;
  }
  WorkerState& worker = workers_[static_cast<size_t>(w)];
  const float scale = bsp ? 0.f : ArrivalScale(h);
  for (int i = 0; i < h.chunks_size(); ++i) {
    const uint32_t id = h.chunks(i).id();
    const int local = store.LocalIndex(id);
    if (worker.arrived[static_cast<size_t>(local)]) {
      ++duplicates_dropped_;
      Log("worker " + std::to_string(w) + "'s chunk " + std::to_string(id) + " of iteration " +
          std::to_string(t) + " dropped: received before");
      continue;
    }
    worker.arrived[static_cast<size_t>(local)] = 1;
    ++worker.arrived_count;
    float* grad = m.payloads[static_cast<size_t>(i)];
    if (config_.methods.elastic) {
      if (!bsp) {
        AddToWeights(store, id, grad);
      } else if (step_->Add(local, w, grad)) {
        ++step_chunks_complete_;
        AddToWeights(store, id, step_->sum(local));
        chunk_steps_[static_cast<size_t>(local)] = t + 1;
      }
    } else if (!bsp) {
      float chunk_scale = scale;
      if (config_.methods.staleness_lr) {
        chunk_scale *= StalenessScale(version_ - worker.served_version);
      }
      if (!served_weights_.empty()) Compensate(w, id, local, grad);
      store.ApplyGradientInPlace(id, grad, chunk_scale, static_cast<int>(version_));
    } else if (backups) {
      OfferBackup(w, t, id, local, grad);
    } else if (config_.num_workers == 1 && !clipping) {
      // The one gradient is the step's sum: applied in place on the received
      // frame (RankOrderedSum would copy it first; same floats either way).
      ++step_chunks_complete_;
      const float average = 1.f / static_cast<float>(config_.hyper.iter_size);
      store.ApplyGradientInPlace(id, grad, average, static_cast<int>(t));
      chunk_steps_[static_cast<size_t>(local)] = t + 1;
    } else if (step_->Add(local, w, grad)) {
      ++step_chunks_complete_;
      if (!clipping) {
        const float average =
            1.f / static_cast<float>(config_.num_workers * config_.hyper.iter_size);
        store.ApplyGradientInPlace(id, step_->sum(local), average, static_cast<int>(t));
        chunk_steps_[static_cast<size_t>(local)] = t + 1;  // pulls for t + 1 may take it now
      }
    }
  }
  out.push_back(Reply(m, pstrain::PUSH_ACK));
  if (worker.arrived_count == store.num_chunks()) WorkerCompleted(w);
  if (bsp && step_chunks_complete_ == store.num_chunks()) {
    if (clipping && !config_.methods.elastic) {
      BspAggregated(out);
    } else {
      FinishBspStep();
    }
  }
}

void ShardServer::OfferBackup(int w, int64_t t, uint32_t id, int local, float* grad) {
  if (t < version_) {  // step t is applied: too late
    ++backup_dropped_;
    return;
  }
  switch (backup_step_->Add(local, w, grad)) {
    case BackupStepSum::Offer::kRefused:
      ++backup_dropped_;
      return;
    case BackupStepSum::Offer::kKept:
      return;
    case BackupStepSum::Offer::kCompleted:
      break;
  }
  ++step_chunks_complete_;
  if (config_.hyper.clip_gradients < 0) {
    const float average = 1.f / static_cast<float>(StepWorkers() * config_.hyper.iter_size);
    layout_.store->ApplyGradientInPlace(id, backup_step_->sum(local), average, static_cast<int>(t));
    chunk_steps_[static_cast<size_t>(local)] = t + 1;
  }
}

void ShardServer::Compensate(int w, uint32_t id, int local, float* grad) {
  const auto& pulled = served_weights_[static_cast<size_t>(w)][static_cast<size_t>(local)];
  if (!pulled) return;  // never served since (re)start: nothing to compensate against
  const std::span<const float> now = layout_.store->weights(id);
  const UpdateMethods& m = config_.methods;
  if (m.dc_adaptive) {
    DelayCompensateAdaptive(grad, now.data(), pulled->data(),
                            dc_mean_square_[static_cast<size_t>(local)].data(), now.size(),
                            m.dc_lambda, m.dc_momentum, m.dc_epsilon);
  } else {
    DelayCompensate(grad, now.data(), pulled->data(), now.size(), m.dc_lambda);
  }
}

int ShardServer::StepWorkers() const {
  return config_.num_workers - config_.methods.backup_workers;
}

float* ShardServer::StepSum(int local) {
  return backup_step_ ? backup_step_->sum(local) : step_->sum(local);
}

float ShardServer::ArrivalScale(const pstrain::Header& h) const {
  const float clip = config_.hyper.clip_gradients >= 0
                         ? optim::ClipScale(h.sum_squares(), config_.hyper.clip_gradients)
                         : 1.f;
  return clip / static_cast<float>(config_.num_workers * config_.hyper.iter_size);
}

void ShardServer::WorkerCompleted(int w) {
  WorkerState& worker = workers_[static_cast<size_t>(w)];
  std::fill(worker.arrived.begin(), worker.arrived.end(), 0);
  worker.arrived_count = 0;
  clocks_.Advance(w);
  if (config_.mode != ConsistencyMode::kBsp) {
    RecordStaleness(w);
    ++pushes_applied_;
    version_ = pushes_applied_ / config_.num_workers;
  }
}

void ShardServer::RecordStaleness(int w) {
  const int64_t staleness =
      std::max<int64_t>(0, version_ - workers_[static_cast<size_t>(w)].served_version);
  if (static_cast<int64_t>(staleness_histogram_.size()) <= staleness) {
    staleness_histogram_.resize(static_cast<size_t>(staleness + 1), 0);
  }
  ++staleness_histogram_[static_cast<size_t>(staleness)];
}

// Every chunk of step version_ has its W gradients: contribute this shard's
// part of the global norm.
void ShardServer::BspAggregated(Out& out) {
  const ChunkStore& store = *layout_.store;
  double sum = 0;
  for (int c = 0; c < store.num_chunks(); ++c) {
    sum += optim::SumSquares(
        StepSum(c), static_cast<size_t>(store.length(store.chunk_ids()[static_cast<size_t>(c)])));
  }
  const double w = StepWorkers();
  const double partial = sum / (w * w);  // of the averaged gradient
  if (config_.shard == 0) {
    NotePartial(0, version_, partial, out);
    return;
  }
  Outgoing o;
  o.to = Outgoing::To::kCoordinator;
  o.header = transport::NewHeader(origin(), pstrain::NORM_PARTIAL);
  o.header.set_clock(version_);
  o.header.set_sum_squares(partial);
  out.push_back(std::move(o));
  if (norm_total_ && norm_total_->first == version_) NormTotalKnown(version_, norm_total_->second);
}

void ShardServer::OnNormPartial(const Incoming& m, Out& out) {
  const pstrain::Header& h = m.header;
  if (config_.shard != 0 || h.sender() == 0) {
    Reject(m, "NORM_PARTIAL goes from servers 1.. to server 0", out);
    return;
  }
  if (!ExpectsNorms()) {
    Reject(m, "no gradient norms are exchanged (bsp with clip_gradients only, after init)", out);
    return;
  }
  if (h.clock() > version_ + 1) {
    Reject(m,
           "NORM_PARTIAL for step " + std::to_string(h.clock()) + " while at step " +
               std::to_string(version_),
           out);
    return;
  }
  if (h.clock() < version_) {
    Log("NORM_PARTIAL from server " + std::to_string(h.sender()) + " for step " +
        std::to_string(h.clock()) + " dropped: that step is applied");
    return;
  }
  NotePartial(h.sender(), h.clock(), h.sum_squares(), out);
}

bool ShardServer::ExpectsNorms() const {
  return config_.mode == ConsistencyMode::kBsp && config_.hyper.clip_gradients >= 0 &&
         initialized();
}

void ShardServer::NotePartial(int shard, int64_t clock, double sum_squares, Out& out) {
  auto& partials = norm_partials_[clock];
  partials.resize(static_cast<size_t>(config_.num_shards));
  partials[static_cast<size_t>(shard)] = sum_squares;
  double total = 0;
  for (const auto& p : partials) {
    if (!p) return;
    total += *p;  // shard order, whatever order they arrived in
  }
  norm_partials_.erase(clock);
  if (config_.num_shards > 1) {
    Outgoing o;
    o.to = Outgoing::To::kAllServers;
    o.header = transport::NewHeader(origin(), pstrain::NORM_TOTAL);
    o.header.set_clock(clock);
    o.header.set_sum_squares(total);
    out.push_back(std::move(o));
  }
  NormTotalKnown(clock, total);
}

void ShardServer::OnNormTotal(const Incoming& m, Out& out) {
  const pstrain::Header& h = m.header;
  if (config_.shard == 0 || h.sender() != 0) {
    Reject(m, "NORM_TOTAL goes from server 0 to the others", out);
    return;
  }
  if (!ExpectsNorms()) {
    Reject(m, "no gradient norms are exchanged (bsp with clip_gradients only, after init)", out);
    return;
  }
  if (h.clock() < version_) {
    Log("NORM_TOTAL for step " + std::to_string(h.clock()) + " dropped: that step is applied");
    return;
  }
  NormTotalKnown(h.clock(), h.sum_squares());
}

void ShardServer::NormTotalKnown(int64_t clock, double total) {
  if (clock == version_ && step_chunks_complete_ == layout_.store->num_chunks()) {
    ApplyBspStep(total);
  } else {
    norm_total_ = {clock, total};  // applied when the own sums are complete
  }
}

void ShardServer::ApplyBspStep(double global_sum_squares) {
  ChunkStore& store = *layout_.store;
  const float clip = optim::ClipScale(global_sum_squares, config_.hyper.clip_gradients);
  const float scale = clip / static_cast<float>(StepWorkers() * config_.hyper.iter_size);
  for (int c = 0; c < store.num_chunks(); ++c) {
    store.ApplyGradientInPlace(store.chunk_ids()[static_cast<size_t>(c)], StepSum(c), scale,
                               static_cast<int>(version_));
  }
  FinishBspStep();
}

void ShardServer::FinishBspStep() {
  if (backup_step_) {
    // The gradients kept were all computed on the weights of this step.
    if (staleness_histogram_.empty()) staleness_histogram_.resize(1, 0);
    staleness_histogram_[0] += StepWorkers();
    backup_step_->Reset();
  } else {
    for (int w = 0; w < config_.num_workers; ++w) RecordStaleness(w);
    step_->Reset();
  }
  pushes_applied_ += StepWorkers();
  ++version_;
  step_chunks_complete_ = 0;
  norm_total_.reset();
}

}  // namespace pstrain::server

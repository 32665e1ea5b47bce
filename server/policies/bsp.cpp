// bsp: rank-ordered aggregation, one step per iteration, the norm exchange.
#include "server/policies/bsp.hpp"

#include <algorithm>
#include <string>

#include "common/optim/update_rule.hpp"

namespace pstrain::server {

void BspPolicy::Install() {
  const std::vector<int64_t> lengths = ChunkLengths();
  step_.emplace(core_.config.num_workers, lengths, core_.threads.get());
  chunk_steps_.assign(lengths.size(), 0);
}

std::vector<int64_t> BspPolicy::ChunkLengths() const {
  std::vector<int64_t> lengths;
  for (uint32_t id : core_.store().chunk_ids()) lengths.push_back(core_.store().length(id));
  return lengths;
}

std::string BspPolicy::RefusePush(const pstrain::Header& push) const {
  const int64_t t = push.clock();
  if (t == core_.version) return "";
  return "pushed iteration " + std::to_string(t) + " before step " + std::to_string(t - 1) +
         " was applied (version " + std::to_string(core_.version) + ")";
}

void BspPolicy::OnGradient(ChunkGradient& g) {
  if (core_.config.num_workers == 1 && !Clipping()) {
    // The one gradient is the step's sum: applied in place on the received
    // frame, or decoded as it is applied (RankOrderedSum would copy it first;
    // same floats either way).
    ++step_chunks_complete_;
    core_.KeepStepStart(g.id, g.local, g.iteration);
    ApplyChunkGradient(core_.store(), g, StepScale(), static_cast<int>(g.iteration));
    chunk_steps_[static_cast<size_t>(g.local)] = g.iteration + 1;
    return;
  }
  if (step_->Add(g.local, g.worker, g.encoded)) ChunkComplete(g.id, g.local, g.iteration);
}

void BspPolicy::ChunkComplete(uint32_t id, int local, int64_t t) {
  ++step_chunks_complete_;
  if (!Clipping()) LandChunk(id, local, StepSum(local), t);
}

void BspPolicy::LandChunk(uint32_t id, int local, float* sum, int64_t t) {
  core_.KeepStepStart(id, local, t);  // a pull for t coming after this still gets t's weights
  core_.store().ApplyGradientInPlace(id, sum, StepScale(), static_cast<int>(t));
  chunk_steps_[static_cast<size_t>(local)] = t + 1;  // pulls for t + 1 may take it now
}

void BspPolicy::AfterPush(Out& out) {
  if (step_chunks_complete_ != core_.num_chunks()) return;
  if (Clipping()) {
    Aggregated(out);
  } else {
    FinishStep();
  }
}

bool BspPolicy::ChunkReady(int local, const DeferredPull& pull) const {
  return std::max(core_.version, chunk_steps_[static_cast<size_t>(local)]) >= pull.clock;
}

void BspPolicy::Aggregated(Out& out) {
  const ChunkStore& store = core_.store();
  double sum = 0;
  for (int c = 0; c < store.num_chunks(); ++c) {
    sum += optim::SumSquares(
        StepSum(c), static_cast<size_t>(store.length(store.chunk_ids()[static_cast<size_t>(c)])));
  }
  const double w = StepGradients();
  const double partial = sum / (w * w);  // of the averaged gradient
  const int64_t version = core_.version;
  if (core_.config.shard == 0) {
    NotePartial(0, version, partial, out);
    return;
  }
  Outgoing o;
  o.to = Outgoing::To::kCoordinator;
  o.header = transport::NormHeader(core_.origin(), pstrain::NORM_PARTIAL, version, partial);
  out.push_back(std::move(o));
  if (norm_total_ && norm_total_->first == version) NormTotalKnown(version, norm_total_->second);
}

void BspPolicy::OnNormPartial(int shard, int64_t clock, double sum_squares, Out& out) {
  NotePartial(shard, clock, sum_squares, out);
}

void BspPolicy::NotePartial(int shard, int64_t clock, double sum_squares, Out& out) {
  auto& partials = norm_partials_[clock];
  partials.resize(static_cast<size_t>(core_.config.num_shards));
  partials[static_cast<size_t>(shard)] = sum_squares;
  double total = 0;
  for (const auto& p : partials) {
    if (!p) return;
    total += *p;  // shard order, whatever order they arrived in
  }
  norm_partials_.erase(clock);
  if (core_.config.num_shards > 1) {
    Outgoing o;
    o.to = Outgoing::To::kAllServers;
    o.header = transport::NormHeader(core_.origin(), pstrain::NORM_TOTAL, clock, total);
    out.push_back(std::move(o));
  }
  NormTotalKnown(clock, total);
}

void BspPolicy::NormTotalKnown(int64_t clock, double total) {
  if (clock == core_.version && step_chunks_complete_ == core_.num_chunks()) {
    ApplyStep(total);
  } else {
    norm_total_ = {clock, total};  // applied when the own sums are complete
  }
}

void BspPolicy::ApplyStep(double global_sum_squares) {
  ChunkStore& store = core_.store();
  const float clip = optim::ClipScale(global_sum_squares, core_.config.hyper.clip_gradients);
  const float scale = StepScale(clip);
  for (int c = 0; c < store.num_chunks(); ++c) {
    store.ApplyGradientInPlace(store.chunk_ids()[static_cast<size_t>(c)], StepSum(c), scale,
                               static_cast<int>(core_.version));
  }
  FinishStep();
}

void BspPolicy::ResetStep() {
  for (int w = 0; w < core_.config.num_workers; ++w) core_.RecordStaleness(w);
  step_->Reset();
}

void BspPolicy::FinishStep() {
  ResetStep();
  core_.ForgetStepStarts();
  core_.pushes_applied += StepGradients();
  ++core_.version;
  step_chunks_complete_ = 0;
  norm_total_.reset();
}

PSTRAIN_REGISTER_POLICY(PolicyRegistry::Entry{
    .name = "bsp",
    .rank = 0,
    .wants = [](const ShardConfig& c) { return c.mode == ConsistencyMode::kBsp; },
    .validate = {},
    .base = [](ShardCore& core) { return std::make_unique<BspPolicy>(core); },
    .wrapper = {}});

}  // namespace pstrain::server

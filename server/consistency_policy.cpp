#include "server/consistency_policy.hpp"

#include <algorithm>

namespace pstrain::server {

ShardCore::ShardCore(ShardConfig c)
    : config(std::move(c)),
      clocks(config.num_workers),
      workers(static_cast<size_t>(config.num_workers)) {
  if (config.threads > 1 && config.device < 0) {
    threads = std::make_unique<ApplyThreads>(config.threads);
  }
}

float* ChunkGradient::Values() {
  if (!encoded.is_float32()) {
    decoded->resize(encoded.n);
    DecodeRange(encoded, 0, encoded.n, decoded->data());
    values = decoded->data();
    encoded = EncodedGradient{pstrain::FLOAT32, values, encoded.n * sizeof(float), encoded.n};
  }
  return values;
}

void ApplyChunkGradient(ChunkStore& store, ChunkGradient& g, float grad_scale, int iter) {
  if (g.encoded.is_float32()) {
    store.ApplyGradientInPlace(g.id, g.values, grad_scale, iter);
  } else {
    store.ApplyEncoded(g.id, g.encoded, grad_scale, iter);
  }
}

void ShardCore::RecordStaleness(int w) {
  const int64_t staleness =
      std::max<int64_t>(0, version - workers[static_cast<size_t>(w)].served_version);
  if (static_cast<int64_t>(staleness_histogram.size()) <= staleness) {
    staleness_histogram.resize(static_cast<size_t>(staleness + 1), 0);
  }
  ++staleness_histogram[static_cast<size_t>(staleness)];
}

void ShardCore::KeepStepStart(uint32_t id, int local, int64_t step) {
  ChunkStore& s = store();
  if (s.device() >= 0) return;
  if (step_starts.size() != static_cast<size_t>(s.num_chunks())) {
    step_starts.resize(static_cast<size_t>(s.num_chunks()));
  }
  StepStart& kept = step_starts[static_cast<size_t>(local)];
  kept.step = step;
  // Held here, the buffer stays as it is: the step's in-place update moves the
  // chunk to another buffer first (ChunkStore's copy-on-write).
  kept.weights = s.Snapshot(id);
  kept.history.resize(keep_step_start_history ? static_cast<size_t>(s.history_slots()) : 0);
  for (size_t k = 0; k < kept.history.size(); ++k) {
    const std::span<const float> h = s.history(id, static_cast<int>(k));
    kept.history[k].assign(h.begin(), h.end());  // capacity reused from step to step
  }
}

const ShardCore::StepStart* ShardCore::StepStartOf(int local, int64_t step) const {
  if (static_cast<size_t>(local) >= step_starts.size()) return nullptr;
  const StepStart& kept = step_starts[static_cast<size_t>(local)];
  return kept.step == step ? &kept : nullptr;
}

void ShardCore::ForgetStepStarts() {
  for (StepStart& kept : step_starts) {
    kept.step = -1;
    kept.weights.reset();  // back to the store's free buffers
  }
}

void ShardCore::RecordFresh(int64_t n) {
  if (staleness_histogram.empty()) staleness_histogram.resize(1, 0);
  staleness_histogram[0] += n;
}

float ConsistencyPolicy::StepScale(float clip) const {
  return AveragingScale(StepGradients(), core_.config.hyper.iter_size, clip);
}

PolicyRegistry& PolicyRegistry::Global() {
  static PolicyRegistry* registry = new PolicyRegistry();  // never destroyed: used at exit
  return *registry;
}

bool PolicyRegistry::Add(Entry entry) {
  PSTRAIN_CHECK_MSG(entries_.count(entry.name) == 0,
                    "consistency policy registered twice: " + entry.name);
  PSTRAIN_CHECK_MSG(static_cast<bool>(entry.base) != static_cast<bool>(entry.wrapper),
                    "consistency policy " + entry.name + " must be a base or a wrapper");
  PSTRAIN_CHECK(static_cast<bool>(entry.wants));
  std::string name = entry.name;
  entries_.emplace(std::move(name), std::move(entry));
  return true;
}

std::vector<const PolicyRegistry::Entry*> PolicyRegistry::Wanting(const ShardConfig& config) const {
  std::vector<const Entry*> wanting;
  for (const auto& [name, entry] : entries_) {
    if (entry.wants(config)) wanting.push_back(&entry);
  }
  // By rank, then name: the order is the same in every process.
  std::stable_sort(wanting.begin(), wanting.end(),
                   [](const Entry* a, const Entry* b) { return a->rank < b->rank; });
  return wanting;
}

Status PolicyRegistry::Validate(const ShardConfig& config) const {
  bool base = false;
  for (const Entry* entry : Wanting(config)) {
    base = base || static_cast<bool>(entry->base);
    if (entry->validate) PSTRAIN_RETURN_IF_ERROR(entry->validate(config));
  }
  if (!base) {
    std::string names;
    for (const std::string& n : Names()) names += (names.empty() ? "" : ", ") + n;
    return Status::Error("no consistency policy serves mode " + std::string(ModeName(config.mode)) +
                         " (registered: " + names + ")");
  }
  return Status::Ok();
}

std::vector<std::string> PolicyRegistry::Chosen(const ShardConfig& config) const {
  const std::vector<const Entry*> wanting = Wanting(config);
  std::vector<std::string> chosen;
  for (auto it = wanting.rbegin(); it != wanting.rend(); ++it) {
    if ((*it)->base) {
      chosen.push_back((*it)->name);
      break;
    }
  }
  for (const Entry* entry : wanting) {
    if (entry->wrapper) chosen.push_back(entry->name);
  }
  return chosen;
}

std::unique_ptr<ConsistencyPolicy> PolicyRegistry::Create(ShardCore& core) const {
  const std::vector<std::string> chosen = Chosen(core.config);
  PSTRAIN_CHECK_MSG(!chosen.empty(), "no consistency policy for this config (Validate first)");
  std::unique_ptr<ConsistencyPolicy> policy = entries_.at(chosen[0]).base(core);
  for (size_t i = 1; i < chosen.size(); ++i) {
    policy = entries_.at(chosen[i]).wrapper(core, std::move(policy));
  }
  return policy;
}

std::vector<std::string> PolicyRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

}  // namespace pstrain::server

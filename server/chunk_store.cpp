#include "server/chunk_store.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "common/optim/lr_policy.hpp"

namespace pstrain::server {
namespace {

// Older snapshots kept per chunk for reuse; more than this are still held by
// slow pullers and are simply let go (their holders free them).
constexpr size_t kMaxRetired = 4;

}  // namespace

Result<ChunkStore> ChunkStore::Create(const KeyPlacement& placement, int shard,
                                      const std::vector<optim::ParamHyper>& param_hyper,
                                      const optim::SolverHyper& hyper, int device) {
  if (static_cast<int>(param_hyper.size()) != placement.num_params()) {
    return Status::Error("ChunkStore: " + std::to_string(param_hyper.size()) +
                         " parameter multipliers for " + std::to_string(placement.num_params()) +
                         " parameters");
  }
  PSTRAIN_ASSIGN_OR_RETURN(auto rule, optim::MakeUpdateRule(hyper));
  ChunkStore store;
  store.hyper_ = hyper;
  store.history_slots_ = rule->history_slots();
  store.rule_ = std::move(rule);
  store.ids_ = placement.shard_chunks(shard);
  store.local_.assign(placement.chunks().size(), -1);
  store.slots_.resize(store.ids_.size());
  int64_t longest = 0;
  for (size_t i = 0; i < store.ids_.size(); ++i) {
    const Chunk& c = placement.chunk(store.ids_[i]);
    store.local_[c.id] = static_cast<int>(i);
    Slot& s = store.slots_[i];
    s.length = c.length;
    s.param = param_hyper[static_cast<size_t>(c.param)];
    s.data = std::make_shared<std::vector<float>>(static_cast<size_t>(c.length), 0.f);
    s.history.assign(static_cast<size_t>(store.history_slots_),
                     std::vector<float>(static_cast<size_t>(c.length), 0.f));
    longest = std::max(longest, c.length);
  }
  store.scratch_.resize(static_cast<size_t>(longest));
  if (device >= 0) {
    PSTRAIN_RETURN_IF_ERROR(optim::CheckGpuKernel(hyper.type)
                                .WithContext("server_device gpu:" + std::to_string(device)));
    std::vector<int64_t> lengths;
    for (const Slot& s : store.slots_) lengths.push_back(s.length);
    PSTRAIN_ASSIGN_OR_RETURN(store.device_,
                             DeviceChunks::Create(device, lengths, store.history_slots_));
    store.device_index_ = device;
  }
  return store;
}

int ChunkStore::LocalIndex(uint32_t id) const { return id < local_.size() ? local_[id] : -1; }

void ChunkStore::Retire(Slot& s, std::shared_ptr<std::vector<float>> buffer) {
  if (s.retired.size() >= kMaxRetired) {
    // Let go of one still held by a puller (it frees it), else the oldest.
    auto held = std::find_if(s.retired.begin(), s.retired.end(),
                             [](const auto& b) { return b.use_count() > 1; });
    s.retired.erase(held != s.retired.end() ? held : s.retired.begin());
  }
  s.retired.push_back(std::move(buffer));
}

std::shared_ptr<std::vector<float>> ChunkStore::FreeBuffer(Slot& s) {
  // A retired buffer whose only holder is this store is free to overwrite.
  // Other threads (ZeroMQ's, releasing a sent frame) only ever lower a count,
  // so a count of 1 seen here stays 1.
  auto free = std::find_if(s.retired.begin(), s.retired.end(),
                           [](const auto& buffer) { return buffer.use_count() == 1; });
  if (free == s.retired.end()) {
    return std::make_shared<std::vector<float>>(static_cast<size_t>(s.length));
  }
  auto buffer = std::move(*free);
  s.retired.erase(free);
  std::atomic_thread_fence(std::memory_order_acquire);  // after the holder's last read
  return buffer;
}

void ChunkStore::Changed(Slot& s) {
  if (!s.current) return;
  Retire(s, std::move(s.current));
  s.current.reset();
}

const float* ChunkStore::WritableFrom(Slot& s) {
  if (device_ || s.data.use_count() == 1) {
    std::atomic_thread_fence(std::memory_order_acquire);
    return nullptr;
  }
  auto next = FreeBuffer(s);
  const float* from = s.data->data();  // kept alive by the holder and s.retired
  Retire(s, std::exchange(s.data, std::move(next)));
  ++copies_on_write_;
  return from;
}

void ChunkStore::CopyAndApply(Slot& s, const optim::StepInputs& in, const float* from,
                              float* diff, size_t begin, size_t end) const {
  if (from == nullptr) return ApplyRange(s, in, diff, begin, end);
  for (size_t b = begin; b < end; b += kDecodeBlock) {
    const size_t e = std::min(end, b + kDecodeBlock);
    std::memcpy(s.data->data() + b, from + b, (e - b) * sizeof(float));
    ApplyRange(s, in, diff + (b - begin), b, e);
  }
}

std::span<const float> ChunkStore::weights(uint32_t id) const {
  const Slot& s = slot(id);
  if (device_) device_->Download(LocalIndex(id), -1, s.data->data());
  return *s.data;
}

std::span<const float> ChunkStore::history(uint32_t id, int k) const {
  const Slot& s = slot(id);
  std::vector<float>& h = s.history[static_cast<size_t>(k)];
  if (device_) device_->Download(LocalIndex(id), k, h.data());
  return h;
}

void ChunkStore::SetWeights(uint32_t id, std::span<const float> values) {
  Slot& s = slot(id);
  PSTRAIN_CHECK(static_cast<int64_t>(values.size()) == s.length);
  (void)WritableFrom(s);  // every value is written below
  std::copy(values.begin(), values.end(), s.data->begin());
  if (device_) device_->Upload(LocalIndex(id), -1, s.data->data());
  Changed(s);
}

void ChunkStore::SetHistory(uint32_t id, int k, std::span<const float> values) {
  Slot& s = slot(id);
  PSTRAIN_CHECK(static_cast<int64_t>(values.size()) == s.length);
  std::vector<float>& h = s.history[static_cast<size_t>(k)];
  std::copy(values.begin(), values.end(), h.begin());
  if (device_) device_->Upload(LocalIndex(id), k, h.data());
}

void ChunkStore::ApplyGradient(uint32_t id, const float* grad, float grad_scale, int iter) {
  if (device_) {
    // The device copies the gradient in; no host scratch needed.
    Slot& s = slot(id);
    const optim::StepInputs in{optim::LearningRate(hyper_, iter), iter, grad_scale};
    device_->Apply(LocalIndex(id), *rule_, in, s.param, grad);
    Changed(s);
    return;
  }
  const size_t n = static_cast<size_t>(slot(id).length);
  std::memcpy(scratch_.data(), grad, n * sizeof(float));
  ApplyGradientInPlace(id, scratch_.data(), grad_scale, iter);
}

void ChunkStore::ForRanges(size_t n, const std::function<void(int, size_t, size_t)>& fn) {
  if (threads_ == nullptr) return fn(0, 0, n);
  threads_->ForRanges(n, fn);
}

void ChunkStore::ApplyRange(Slot& s, const optim::StepInputs& in, float* diff, size_t begin,
                            size_t end) const {
  // A slice of a parameter is any contiguous range of it (update_rule.hpp).
  constexpr size_t kMaxSlots = 4;
  PSTRAIN_CHECK(s.history.size() <= kMaxSlots);
  float* history[kMaxSlots];
  for (size_t k = 0; k < s.history.size(); ++k) history[k] = s.history[k].data() + begin;
  rule_->Apply(in, s.param,
               optim::ParamSlice{s.data->data() + begin, diff,
                                 std::span<float* const>(history, s.history.size()),
                                 end - begin});
}

void ChunkStore::ApplyGradientInPlace(uint32_t id, float* grad, float grad_scale, int iter) {
  if (device_) return ApplyGradient(id, grad, grad_scale, iter);  // grad stays untouched
  Slot& s = slot(id);
  const optim::StepInputs in{optim::LearningRate(hyper_, iter), iter, grad_scale,
                             /*diff_holds_update=*/false};  // grad is dropped after this
  const float* from = WritableFrom(s);
  ForRanges(static_cast<size_t>(s.length), [&](int, size_t begin, size_t end) {
    CopyAndApply(s, in, from, grad + begin, begin, end);
  });
  Changed(s);
}

void ChunkStore::ApplyEncoded(uint32_t id, const EncodedGradient& grad, float grad_scale,
                              int iter) {
  Slot& s = slot(id);
  PSTRAIN_CHECK(grad.n == static_cast<uint64_t>(s.length));
  if (device_) {  // the device copies the whole gradient in: decode it whole
    DecodeRange(grad, 0, grad.n, scratch_.data());
    return ApplyGradient(id, scratch_.data(), grad_scale, iter);
  }
  const optim::StepInputs in{optim::LearningRate(hyper_, iter), iter, grad_scale,
                             /*diff_holds_update=*/false};
  const float* from = WritableFrom(s);
  const size_t parts = threads_ != nullptr ? static_cast<size_t>(threads_->threads()) : 1;
  if (blocks_.size() < parts) blocks_.resize(parts, std::vector<float>(kDecodeBlock));
  ForRanges(static_cast<size_t>(s.length), [&](int part, size_t begin, size_t end) {
    float* block = blocks_[static_cast<size_t>(part)].data();
    for (size_t b = begin; b < end; b += kDecodeBlock) {
      const size_t e = std::min(end, b + kDecodeBlock);
      DecodeRange(grad, b, e, block);
      CopyAndApply(s, in, from, block, b, e);
    }
  });
  Changed(s);
}

std::shared_ptr<const std::vector<float>> ChunkStore::Snapshot(uint32_t id) {
  Slot& s = slot(id);
  if (!device_) return s.data;  // written again only once nobody holds it (WritableFrom)
  if (!s.current) {
    s.current = FreeBuffer(s);
    device_->Download(LocalIndex(id), -1, s.current->data());
  }
  return s.current;
}

}  // namespace pstrain::server

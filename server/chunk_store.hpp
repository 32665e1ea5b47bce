// ChunkStore: the chunks one server shard holds — their weights, the update
// rule's history, and read-only per-version snapshots served to pullers.
//
// On the CPU a snapshot is the weights buffer itself (no copy): the store
// writes a buffer only while nobody else holds it. When a puller (a reply
// still in flight, DC-ASGD's served buffers) holds the current buffer at the
// next change, the store moves to a free buffer first (copy-on-write: one
// copy, only then). In the usual loop — the reply is sent before the next
// push arrives — the weights are updated in place and served as they are.
//
// With a device (Create's `device` >= 0) the weights and history live in GPU
// memory (DeviceChunks) and the updates run there; the host copies behind
// weights()/history() are refreshed from the device when read, and snapshots
// are copied device-to-host. Without one everything stays on the CPU.
//
// Not thread-safe: one event loop owns it. Snapshot buffers handed out may be
// released on any thread (only their reference count is touched there).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/optim/update_rule.hpp"
#include "common/ps/key_placement.hpp"
#include "common/status.hpp"
#include "server/apply_threads.hpp"
#include "server/device_chunks.hpp"
#include "server/encoded_gradient.hpp"

namespace pstrain::server {

class ChunkStore {
 public:
  // The store of `shard`'s chunks under `placement`, weights and history zero.
  // `param_hyper` holds each parameter's lr_mult/decay_mult, in parameter order.
  // Errors: an invalid `hyper` (ValidateSolverHyper's message), a param_hyper
  // count other than placement.num_params(); with `device` >= 0, DeviceChunks's
  // (no CUDA build, no such device, out of device memory).
  static Result<ChunkStore> Create(const KeyPlacement& placement, int shard,
                                   const std::vector<optim::ParamHyper>& param_hyper,
                                   const optim::SolverHyper& hyper, int device = -1);

  ChunkStore(ChunkStore&&) = default;
  ChunkStore& operator=(ChunkStore&&) = default;
  ChunkStore(const ChunkStore&) = delete;
  ChunkStore& operator=(const ChunkStore&) = delete;

  // Global ids of the chunks held, ascending (KeyPlacement::shard_chunks).
  const std::vector<uint32_t>& chunk_ids() const { return ids_; }
  int num_chunks() const { return static_cast<int>(ids_.size()); }
  // Position of global chunk `id` in chunk_ids(), or -1 when not held here.
  int LocalIndex(uint32_t id) const;
  bool Holds(uint32_t id) const { return LocalIndex(id) >= 0; }
  int history_slots() const { return history_slots_; }
  int device() const { return device_ ? device_index_ : -1; }
  const char* solver_type() const { return rule_->type(); }

  // REQUIRES (all below): Holds(id); 0 <= slot < history_slots().
  int64_t length(uint32_t id) const { return slot(id).length; }
  // On a device these copy the array to the host first (a synchronous copy).
  std::span<const float> weights(uint32_t id) const;
  std::span<const float> history(uint32_t id, int k) const;
  // REQUIRES: values.size() == length(id).
  void SetWeights(uint32_t id, std::span<const float> values);
  void SetHistory(uint32_t id, int k, std::span<const float> values);

  // One solver step on chunk `id`: rate = LearningRate(hyper, iter), the
  // chunk's parameter's lr_mult/decay_mult, diff = grad * grad_scale.
  // REQUIRES: grad holds length(id) values; it is left untouched.
  void ApplyGradient(uint32_t id, const float* grad, float grad_scale, int iter);
  // As ApplyGradient, but uses `grad` as the rule's scratch (clobbered): no copy.
  void ApplyGradientInPlace(uint32_t id, float* grad, float grad_scale, int iter);
  // As ApplyGradient on the decoded values of `grad` (float32 or a compressed
  // push's chunk, server/encoded_gradient.hpp), decoded block by block into a
  // cache-sized scratch and applied at once: one pass over the weights, the
  // same floats as decoding first. REQUIRES: grad.n == length(id).
  void ApplyEncoded(uint32_t id, const EncodedGradient& grad, float grad_scale, int iter);

  // The pool that splits the CPU passes over a chunk (null: one thread). The
  // store does not own it; it must outlive the store's updates.
  void set_threads(ApplyThreads* threads) { threads_ = threads; }

  // The chunk's weights as of now, immutable while the caller holds it. Every
  // call between two changes of the chunk returns the same buffer. On the CPU
  // it is the weights buffer itself (no copy; the next change while it is held
  // moves the weights to a free buffer, reusing one of an older version that
  // nobody holds any more); on a device a host copy made at the first call
  // after a change.
  std::shared_ptr<const std::vector<float>> Snapshot(uint32_t id);
  // Copies made because a snapshot was still held at a change (CPU only).
  int64_t copy_on_write_count() const { return copies_on_write_; }

 private:
  struct Slot {
    int64_t length = 0;
    optim::ParamHyper param;
    // The weights; on the CPU also the snapshot handed to pullers (written only
    // while data.use_count() == 1: see WritableFrom). On a device: the host copy,
    // refreshed by the const accessors (hence mutable), never handed out.
    mutable std::shared_ptr<std::vector<float>> data;
    mutable std::vector<std::vector<float>> history;
    // Device only: the snapshot of the weights; null after a change.
    std::shared_ptr<std::vector<float>> current;
    std::vector<std::shared_ptr<std::vector<float>>> retired;  // older snapshots
  };

  ChunkStore() = default;
  Slot& slot(uint32_t id) { return slots_[static_cast<size_t>(LocalIndex(id))]; }
  const Slot& slot(uint32_t id) const { return slots_[static_cast<size_t>(LocalIndex(id))]; }
  void Changed(Slot& s);  // device: retires the current snapshot
  // CPU: makes s.data exclusively the store's before a write (copy-on-write
  // when a puller, or a bsp step's kept start, still holds it), without
  // copying: returns the values an update must start from when they moved to
  // another buffer, or null when the update goes in place. The caller copies them block by block just before updating the
  // block, while the block is in cache, on the apply threads: a held snapshot
  // then costs no second pass over memory.
  const float* WritableFrom(Slot& s);
  // The update of values [begin, end) of s from `from` (null: in place) with
  // the gradient diff[0, end - begin), in blocks of kDecodeBlock values.
  void CopyAndApply(Slot& s, const optim::StepInputs& in, const float* from, float* diff,
                    size_t begin, size_t end) const;
  // A retired buffer nobody else holds (moved out of s.retired), or a new one.
  std::shared_ptr<std::vector<float>> FreeBuffer(Slot& s);
  void Retire(Slot& s, std::shared_ptr<std::vector<float>> buffer);

  optim::SolverHyper hyper_;
  std::unique_ptr<optim::UpdateRule> rule_;
  int history_slots_ = 0;
  std::vector<uint32_t> ids_;
  std::vector<int> local_;  // global id -> index into slots_, or -1
  std::vector<Slot> slots_;
  // Runs the rule on [begin, end) of slot s with `diff` as its gradient
  // (diff[0] is value begin). Safe on several threads for disjoint ranges.
  void ApplyRange(Slot& s, const optim::StepInputs& in, float* diff, size_t begin,
                  size_t end) const;
  // fn(part, begin, end) over [0, n) on the pool (or on this thread).
  void ForRanges(size_t n, const std::function<void(int, size_t, size_t)>& fn);

  std::vector<float> scratch_;  // ApplyGradient's copy of the gradient
  // ApplyEncoded's decode blocks, kDecodeBlock floats per part of the pool.
  std::vector<std::vector<float>> blocks_;
  ApplyThreads* threads_ = nullptr;
  std::unique_ptr<DeviceChunks> device_;  // null: weights and history on the CPU
  int device_index_ = -1;
  int64_t copies_on_write_ = 0;
};

}  // namespace pstrain::server

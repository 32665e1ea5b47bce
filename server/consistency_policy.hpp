// The consistency policy: what a shard does with a gradient and when it may
// answer a pull. ShardState (shard_state.hpp) is the dispatcher: it parses
// messages, keeps the ChunkStore, the clocks, statistics and checkpoints in a
// ShardCore, and asks its ConsistencyPolicy at four points:
//
//   OnGradient   a chunk of a worker's push arrived (deduplicated, in the
//                push's order); the policy applies it, buffers it for a step
//                or drops it.
//   PullReady    the whole deferred pull may be answered now.
//   ChunkReady   with PullsByChunk, one chunk of it may go out now.
//   StepScale    the averaging factor of a step: clip / (gradients * iter_size),
//                computed here and nowhere else (AveragingScale).
//
// Policies live in server/policies/, one file each, and register by name
// (PSTRAIN_REGISTER_POLICY), as layers do (worker/layer_registry.hpp). A base
// policy says which configs it serves (`wants`); of the bases that want a
// config, the one of highest rank is made. Wrappers (`wants` true as well)
// are then put around it in ascending rank, each forwarding what it does not
// change (PolicyWrapper). pstrain_server is a shared library, so every
// registration in it runs when it is loaded, whoever links it.
//
//   bsp             bsp.cpp             aggregate W gradients in rank order, one step
//   backup_workers  backup_workers.cpp  bsp over the first W-b gradients of a step
//   ssp, asp        ssp.cpp, asp.cpp    apply on arrival (arrival.hpp), bound t - s / none
//   ssp_per_worker  ssp_per_worker.cpp  ssp with worker w's own bound s_w
//   elastic         elastic.cpp         pushes are weight deltas (EASGD, local SGD)
//   staleness_lr    staleness_lr.cpp    wrapper: scale by 1 / max(1, staleness)
//   dc_asgd         dc_asgd.cpp         wrapper: delay compensation of each gradient
//   step_gate       step_gate.cpp       wrapper: pulls for iterations >= the gate wait
//
// Not thread-safe: the shard's one event loop calls everything.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/ps/averaging.hpp"
#include "common/status.hpp"
#include "common/transport/protocol.hpp"
#include "proto/pstrain.pb.h"
#include "server/apply_threads.hpp"
#include "server/clock_table.hpp"
#include "server/encoded_gradient.hpp"
#include "server/shard_config.hpp"
#include "server/shard_layout.hpp"
#include "server/shard_messages.hpp"

namespace pstrain::server {

// AveragingScale (clip / (gradients * iter_size)) lives in
// common/ps/averaging.hpp: the worker's replica of a broadcast weight scales
// by the same function.
using pstrain::AveragingScale;

struct WorkerState {
  std::string peer;           // latest peer that said HELLO as this rank
  std::vector<char> arrived;  // per local chunk: received for the current clock
  int arrived_count = 0;
  int64_t served_version = 0;  // version of the weights last pulled
  // The encoding of this worker's PULL_REPLYs (its HELLO's pull_dtype):
  // FLOAT32, or FLOAT16 / BFLOAT16 (server/pull_encoding.hpp).
  pstrain::DataType pull_dtype = pstrain::FLOAT32;
};

struct DeferredPull {
  using TimePoint = std::chrono::steady_clock::time_point;
  std::string peer;
  int worker = 0;
  int64_t clock = 0;
  TimePoint since, last_warning;
  std::vector<char> sent;  // per local chunk: already in a partial reply
  int sent_count = 0;
  // ssp/asp: the puller's push that must be applied first (chunk by chunk),
  // -1: none (the header's after_push).
  int64_t after_push = -1;
  // Sufficient-factor broadcasting (PULL's broadcast, history_params): the
  // parameters answered with their step's factors, and those whose history
  // goes with their weights (server/factor_relay.hpp).
  std::vector<uint32_t> broadcast;
  std::vector<uint32_t> history_params;
  // rights_ahead: broadcast parameters whose R's went ahead of the step
  // (FACTOR_RIGHT): the relay's entries carry none.
  std::vector<uint32_t> rights_ahead;
};

// The state the dispatcher owns and policies read and advance. Lives at one
// address for the shard's life (ShardState holds it in a unique_ptr), so a
// policy keeps a reference to it.
struct ShardCore {
  explicit ShardCore(ShardConfig c);

  ShardConfig config;
  ClockTable clocks;
  std::vector<WorkerState> workers;
  ShardLayout layout;  // store unset until INIT_PUSH (or Restore)
  // Global steps applied; the lr schedule's iteration. A policy advances it.
  int64_t version = 0;
  int64_t pushes_applied = 0;                // complete pushes (one per worker per step)
  std::vector<int64_t> staleness_histogram;  // [k]: pushes applied k versions after served
  // config.step_gate: pulls for iterations >= gate wait (step_gate.cpp). The
  // shard's start clock (0, or the clock resumed from), raised by GATE only.
  int64_t gate = 0;
  // config.threads: the pool the store and the policy split each chunk's
  // passes over (server/apply_threads.hpp); null with one thread.
  std::unique_ptr<ApplyThreads> threads;

  // REQUIRES: initialised (INIT_PUSH or Restore).
  ChunkStore& store() { return *layout.store; }
  const ChunkStore& store() const { return *layout.store; }
  int num_chunks() const { return layout.store->num_chunks(); }
  // Worker w's chunk `local` of its current clock has arrived.
  bool arrived(int w, int local) const {
    return workers[static_cast<size_t>(w)].arrived[static_cast<size_t>(local)] != 0;
  }
  // Counts one push of worker w, of staleness version - its served version.
  void RecordStaleness(int w);

  // A bsp step lands a chunk as soon as every worker's gradient of it is in,
  // before the rest of the step: its weights (and history) are then those
  // after step t while version is still t. A pull for iteration t that comes
  // after that -- a restarted worker's, whose killed process had pushed the
  // chunk, or a backup worker's -- must still compute iteration t on the
  // weights of iteration t (docs/architecture.md, "Restarts under bsp"), so
  // the policy calls KeepStepStart before landing a chunk and
  // ForgetStepStarts when the step is complete, and the pull reply takes
  // StepStart's values. CPU store only (a device store's snapshot is a copy
  // from the device: GPU shards keep serving the landed values).
  struct StepStart {
    int64_t step = -1;  // the values are those before this step; -1: none kept
    std::shared_ptr<const std::vector<float>> weights;  // ChunkStore::Snapshot: shared, not copied
    std::vector<std::vector<float>> history;            // when keep_step_start_history
  };
  // Keeps chunk `id`'s (local index `local`) values before step `step`.
  void KeepStepStart(uint32_t id, int local, int64_t step);
  // The values chunk `local` had before step `step`, or null when that step
  // has not landed it ahead of the rest (the store holds them).
  const StepStart* StepStartOf(int local, int64_t step) const;
  void ForgetStepStarts();
  // The history too (sufficient-factor broadcasting: a restarted worker's
  // first pull takes the weights with their history, server/factor_relay.hpp).
  bool keep_step_start_history = false;
  std::vector<StepStart> step_starts;  // per local chunk
  // Counts n pushes of staleness 0.
  void RecordFresh(int64_t n);
  transport::Origin origin() const { return {pstrain::SERVER, config.shard, config.job_key}; }
};

// One chunk of a push, handed to the policy: the received frame as it
// travelled (valid during the call only). A policy that only sums or applies
// it passes `encoded` on (RankOrderedSum::Add, ChunkStore::ApplyEncoded: the
// decode is fused into that pass); one that needs the float32 values calls
// Values(), which for a compressed push decodes them once into `decoded`.
struct ChunkGradient {
  int worker = 0;
  int64_t iteration = 0;  // the push's clock
  uint32_t id = 0;
  int local = 0;  // the chunk's index in the store
  // The frame; a float32 one (encoded.is_float32()) may be changed in place
  // through `values`, its writable address.
  EncodedGradient encoded;
  float* values = nullptr;
  // Apply-on-arrival policies: the factor of this chunk's step, PushScale of
  // its push times what wrappers added (staleness_lr). Unused by bsp.
  float scale = 1.f;
  // The shard's buffer for Values() (kept across pushes).
  std::vector<float>* decoded = nullptr;

  // The float32 values, writable: the frame itself, or (compressed) decoded
  // into *decoded on the first call, after which `encoded` is that float32.
  float* Values();
};

// One solver step of g on its chunk: in place on a float32 frame
// (ChunkStore::ApplyGradientInPlace), fused with the decode otherwise
// (ChunkStore::ApplyEncoded).
void ApplyChunkGradient(ChunkStore& store, ChunkGradient& g, float grad_scale, int iter);

class ConsistencyPolicy {
 public:
  using Out = std::vector<Outgoing>;
  virtual ~ConsistencyPolicy() = default;

  // The store exists now (INIT_PUSH or Restore): size the policy's buffers.
  virtual void Install() {}
  // Why a push of iteration h.clock() == the worker's clock may not be taken,
  // "" to take it (the dispatcher has refused other clocks already).
  virtual std::string RefusePush(const pstrain::Header& push) const = 0;
  // The scale every chunk of this push starts from (ChunkGradient::scale).
  virtual float PushScale(const pstrain::Header& push) const = 0;
  virtual void OnGradient(ChunkGradient& g) = 0;
  // Worker w has pushed every chunk of its iteration here; its clock is
  // advanced already.
  virtual void WorkerCompleted(int w) = 0;
  // Once per push, after OnGradient and WorkerCompleted: a step may be due.
  virtual void AfterPush(Out& out) = 0;

  // The pull's consistency bound holds (the dispatcher has checked the init
  // push, after_push and the checkpoint barrier).
  virtual bool PullReady(const DeferredPull& pull) const = 0;
  // The pull may go out chunk by chunk (outside checkpoint barriers).
  virtual bool PullsByChunk(const DeferredPull& pull) const = 0;
  virtual bool ChunkReady(int local, const DeferredPull& pull) const = 0;
  // At a checkpoint barrier of iteration t, with every clock at t: the
  // weights hold step t - 1 (bsp: version >= t; on arrival: always).
  virtual bool StepApplied(int64_t t) const = 0;
  // The clock every worker must have reached for `pull` (its wait message).
  virtual int64_t WaitBound(const DeferredPull& pull) const = 0;
  // Worker w was sent `weights` as chunk `local` (DC-ASGD keeps them).
  virtual void Served(int /*w*/, int /*local*/,
                      const std::shared_ptr<const std::vector<float>>& /*weights*/) {}

  // Gradients are held until a step (bsp): a checkpoint leaves them out and
  // a restore must be a step boundary.
  virtual bool BuffersSteps() const = 0;
  // The number of gradients one step averages (W, or W-b with backups).
  virtual int StepGradients() const = 0;
  // AveragingScale(StepGradients(), iter_size, clip).
  float StepScale(float clip = 1.f) const;

  // Shards exchange gradient norms (bsp with clip_gradients).
  virtual bool ExchangesNorms() const { return false; }
  // REQUIRES (both): ExchangesNorms(); clock >= version. Server 0: shard's partial.
  virtual void OnNormPartial(int /*shard*/, int64_t /*clock*/, double /*sum_squares*/,
                             Out& /*out*/) {}
  // Servers > 0: server 0's total.
  virtual void OnNormTotal(int64_t /*clock*/, double /*total*/) {}
  virtual void AddStats(pstrain::ShardStats& /*stats*/) const {}

 protected:
  explicit ConsistencyPolicy(ShardCore& core) : core_(core) {}
  ShardCore& core_;
};

// A policy around another: forwards every call to `inner`. A wrapper
// overrides what it changes and calls the inner policy for the rest.
class PolicyWrapper : public ConsistencyPolicy {
 public:
  PolicyWrapper(ShardCore& core, std::unique_ptr<ConsistencyPolicy> inner)
      : ConsistencyPolicy(core), inner_(std::move(inner)) {}

  void Install() override { inner_->Install(); }
  std::string RefusePush(const pstrain::Header& push) const override {
    return inner_->RefusePush(push);
  }
  float PushScale(const pstrain::Header& push) const override { return inner_->PushScale(push); }
  void OnGradient(ChunkGradient& g) override { inner_->OnGradient(g); }
  void WorkerCompleted(int w) override { inner_->WorkerCompleted(w); }
  void AfterPush(Out& out) override { inner_->AfterPush(out); }
  bool PullReady(const DeferredPull& pull) const override { return inner_->PullReady(pull); }
  bool PullsByChunk(const DeferredPull& pull) const override { return inner_->PullsByChunk(pull); }
  bool ChunkReady(int local, const DeferredPull& pull) const override {
    return inner_->ChunkReady(local, pull);
  }
  bool StepApplied(int64_t t) const override { return inner_->StepApplied(t); }
  int64_t WaitBound(const DeferredPull& pull) const override { return inner_->WaitBound(pull); }
  void Served(int w, int local, const std::shared_ptr<const std::vector<float>>& weights) override {
    inner_->Served(w, local, weights);
  }
  bool BuffersSteps() const override { return inner_->BuffersSteps(); }
  int StepGradients() const override { return inner_->StepGradients(); }
  bool ExchangesNorms() const override { return inner_->ExchangesNorms(); }
  void OnNormPartial(int shard, int64_t clock, double sum_squares, Out& out) override {
    inner_->OnNormPartial(shard, clock, sum_squares, out);
  }
  void OnNormTotal(int64_t clock, double total) override { inner_->OnNormTotal(clock, total); }
  void AddStats(pstrain::ShardStats& stats) const override { inner_->AddStats(stats); }

 protected:
  std::unique_ptr<ConsistencyPolicy> inner_;
};

// Policy name -> factory. Registration happens during static initialisation
// (PSTRAIN_REGISTER_POLICY); lookups after main() starts are read-only.
class PolicyRegistry {
 public:
  using BaseFactory = std::function<std::unique_ptr<ConsistencyPolicy>(ShardCore&)>;
  using WrapperFactory = std::function<std::unique_ptr<ConsistencyPolicy>(
      ShardCore&, std::unique_ptr<ConsistencyPolicy> inner)>;
  struct Entry {
    std::string name;
    int rank = 0;  // bases: the highest wanting one is made; wrappers: inner first
    std::function<bool(const ShardConfig&)> wants;
    // Run for a config the entry wants; the error names the ps-server flag.
    std::function<Status(const ShardConfig&)> validate;
    BaseFactory base;        // set for a base policy
    WrapperFactory wrapper;  // set for a wrapper
  };

  static PolicyRegistry& Global();
  // REQUIRES: the name is not registered yet, exactly one factory set.
  bool Add(Entry entry);
  // Ok when a base wants `config` and every wanting entry accepts it.
  Status Validate(const ShardConfig& config) const;
  // The entries Create composes for `config`: the base, then the wrappers
  // from the innermost out.
  std::vector<std::string> Chosen(const ShardConfig& config) const;
  // REQUIRES: Validate(core.config).ok().
  std::unique_ptr<ConsistencyPolicy> Create(ShardCore& core) const;
  std::vector<std::string> Names() const;

 private:
  std::vector<const Entry*> Wanting(const ShardConfig& config) const;
  std::map<std::string, Entry> entries_;
};

}  // namespace pstrain::server

// In a policy's .cpp: PSTRAIN_REGISTER_POLICY(PolicyRegistry::Entry{...});
#define PSTRAIN_REGISTER_POLICY(...)                                       \
  static const bool PSTRAIN_CONCAT(pstrain_policy_registered_, __LINE__) = \
      ::pstrain::server::PolicyRegistry::Global().Add(__VA_ARGS__)

// ShardConfig: what one parameter-server shard needs to know about its job.
//
// The ps-server program fills it from its command line; tests fill it by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/optim/solver_hyper.hpp"
#include "common/ps/consistency_mode.hpp"
#include "common/status.hpp"
#include "server/update_methods.hpp"

namespace pstrain::server {

// What a shard does with a PUSH or INIT_PUSH holding a NaN or an infinity
// (the job file's security.nonfinite). Either way no weight takes the value.
enum class NonFinitePolicy {
  kDrop,  // refuse that message with an ERROR to its sender, count it, go on
  kStop,  // the shard stops with a Diverged status naming worker, chunk and clock
};
// "drop" or "stop"; error: `--nonfinite: "x" is not drop or stop`.
Result<NonFinitePolicy> ParseNonFinitePolicy(const std::string& text);

struct ShardConfig {
  int shard = 0;  // this shard's rank, 0 <= shard < num_shards; shard 0 coordinates
  int num_shards = 1;
  int num_workers = 1;
  // bsp with host aggregation (worker/ps/host_group.hpp): each of the
  // num_workers pushers sends the sum of several workers' gradients, and a step
  // averages over all of them: the workers behind the pushes (0: num_workers).
  int averaged_workers = 0;
  ConsistencyMode mode = ConsistencyMode::kBsp;
  int staleness = 0;  // ssp only: a pull for iteration t waits until every clock >= t - staleness
  // ssp only, one per worker: worker w's own bound instead of `staleness`
  // (server/policies/ssp_per_worker.cpp); empty: `staleness` for all.
  std::vector<int> staleness_per_worker;
  optim::SolverHyper hyper;
  int64_t chunk_bytes = 1 << 20;  // KeyPlacement's chunk size
  uint64_t job_key = 0;           // every incoming header must carry it; 0 disables the check
  int snapshot_interval = 0;      // > 0: cut a checkpoint at every multiple of it (PULL barrier)
  int64_t final_iter = 0;         // > 0: also cut one at this iteration (the solver's max_iter)
  std::string snapshot_prefix;    // files <prefix>_iter_<t>.shard<k>.state
  int64_t wait_warn_ms = 10000;   // a pull deferred this long is logged (Tick)
  int device = -1;                // -1: weights and updates on the CPU; N: on CUDA device N
  UpdateMethods methods;          // backup workers, staleness-aware rate, DC-ASGD
  NonFinitePolicy nonfinite = NonFinitePolicy::kStop;
  // The step gate (ps-server --step-gate, server/policies/step_gate.cpp): a
  // pull for iteration t is answered only when t < the gate, which starts at
  // the shard's start clock and is raised by GATE messages from a driver.
  bool step_gate = false;
  // Threads that apply a push (server/apply_threads.hpp): each chunk's values
  // are split among them, every value computed as with one thread, so the
  // weights are the same bits for any count. >= 1 (ps-server --threads).
  int threads = 1;
};

// ps-server --threads: "auto" (or "") -> the cores this process may run on
// (AvailableCores()), else a whole number >= 1; error:
// `--threads: "0" is not a whole number >= 1 or auto`.
Result<int> ParseServerThreads(const std::string& text);
// The CPUs this process may run on (its affinity mask), at least 1.
int AvailableCores();

// "2,4" -> {2, 4} (the ps-server flag --staleness-per-worker); error:
// `--staleness-per-worker: "2,x" is not a list of integers (as 2,4)`.
Result<std::vector<int>> ParseStalenessList(const std::string& text);

// Ok when `config` describes a shard that can run (a registered consistency
// policy serves it, server/consistency_policy.hpp); otherwise the first
// offending field, its value and what is allowed.
Status ValidateShardConfig(const ShardConfig& config);

}  // namespace pstrain::server

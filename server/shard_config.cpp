#include "server/shard_config.hpp"

#include <sched.h>

#include <algorithm>
#include <charconv>

#include "common/optim/update_rule_registry.hpp"
#include "server/consistency_policy.hpp"
#include "server/device_chunks.hpp"

namespace pstrain::server {

Result<NonFinitePolicy> ParseNonFinitePolicy(const std::string& text) {
  if (text == "drop") return NonFinitePolicy::kDrop;
  if (text == "stop") return NonFinitePolicy::kStop;
  return Status::InvalidArgument("--nonfinite: \"" + text + "\" is not drop or stop");
}

Result<std::vector<int>> ParseStalenessList(const std::string& text) {
  std::vector<int> values;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end || values.empty()) {
    int v = 0;
    const auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || (next != end && *next != ',') || (next + 1 == end && *next == ',')) {
      return Status::InvalidArgument("--staleness-per-worker: \"" + text +
                                     "\" is not a list of integers (as 2,4)");
    }
    values.push_back(v);
    p = next == end ? end : next + 1;
  }
  return values;
}

int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

Result<int> ParseServerThreads(const std::string& text) {
  if (text.empty() || text == "auto") return AvailableCores();
  int v = 0;
  const auto [next, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || next != text.data() + text.size() || v < 1) {
    return Status::InvalidArgument("--threads: \"" + text +
                                   "\" is not a whole number >= 1 or auto");
  }
  return v;
}

Status ValidateShardConfig(const ShardConfig& c) {
  if (c.num_shards < 1) {
    return Status::Error("num_shards must be at least 1, got " + std::to_string(c.num_shards));
  }
  if (c.shard < 0 || c.shard >= c.num_shards) {
    return Status::Error("shard must be in [0, " + std::to_string(c.num_shards) + "), got " +
                         std::to_string(c.shard));
  }
  if (c.num_workers < 1) {
    return Status::Error("num_workers must be at least 1, got " + std::to_string(c.num_workers));
  }
  if (c.averaged_workers != 0 &&
      (c.averaged_workers < c.num_workers || c.mode != ConsistencyMode::kBsp ||
       c.methods.backup_workers != 0)) {
    return Status::Error("averaged_workers (host aggregation) must be >= num_workers (" +
                         std::to_string(c.num_workers) + ") in bsp without backup workers, got " +
                         std::to_string(c.averaged_workers));
  }
  if (c.staleness < 0) {
    return Status::Error("staleness must be >= 0, got " + std::to_string(c.staleness));
  }
  if (c.chunk_bytes < 4) {
    return Status::Error("chunk_bytes must be at least 4, got " + std::to_string(c.chunk_bytes));
  }
  if (c.snapshot_interval < 0) {
    return Status::Error("snapshot_interval must be >= 0, got " +
                         std::to_string(c.snapshot_interval));
  }
  if ((c.snapshot_interval > 0 || c.final_iter > 0) && c.snapshot_prefix.empty()) {
    return Status::Error("snapshot_prefix must be given when snapshot_interval > 0");
  }
  if (c.threads < 1) {
    return Status::Error("threads must be at least 1, got " + std::to_string(c.threads));
  }
  if (c.wait_warn_ms <= 0) {
    return Status::Error("wait_warn_ms must be positive, got " + std::to_string(c.wait_warn_ms));
  }
  if (c.device < -1) {
    return Status::Error("device must be -1 (cpu) or a CUDA device number, got " +
                         std::to_string(c.device));
  }
  if (c.device >= 0) {
    PSTRAIN_RETURN_IF_ERROR(CheckServerDevice(c.device));
    // The updates run on the device: refuse a rule without a GPU kernel now,
    // not at the first gradient.
    PSTRAIN_RETURN_IF_ERROR(optim::CheckGpuKernel(c.hyper.type)
                                .WithContext("solver: device gpu:" + std::to_string(c.device)));
  }
  PSTRAIN_RETURN_IF_ERROR(ValidateUpdateMethods(c.methods, c.mode, c.num_workers));
  PSTRAIN_RETURN_IF_ERROR(PolicyRegistry::Global().Validate(c));
  return optim::ValidateSolverHyper(c.hyper).WithContext("solver");
}

}  // namespace pstrain::server

// A shard's checkpoint file (<prefix>_iter_<t>.shard<k>.state): one binary
// pstrain.ShardState with the shard's weights, solver history, worker clocks,
// version and statistics. Written atomically (temporary file, fsync, rename).
//
// Floats are stored as raw little-endian bytes, one `weights` entry per chunk
// and one `history` entry per chunk and slot ([chunk][slot]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "proto/pstrain.pb.h"
#include "server/chunk_store.hpp"
#include "server/shard_config.hpp"
#include "server/shard_layout.hpp"

namespace pstrain::server {

// The progress counters a checkpoint carries besides the chunks.
struct ShardProgress {
  int64_t version = 0;
  int64_t pushes_applied = 0;
  std::vector<int64_t> worker_clocks;
  int64_t staleness_max = 0;
  std::vector<int64_t> staleness_histogram;
};

Status WriteShardState(const std::string& path, const ShardConfig& config,
                       const ShardLayout& layout, const ShardProgress& progress);

struct RestoredShard {
  ShardLayout layout;  // the store holds the saved weights and history
  ShardProgress progress;
};

// Reads `path` and checks it belongs to this shard: the same shard and
// num_shards, chunk_bytes, number of workers, solver type and chunk table as
// `config` and the saved parameter list imply. Every error names the file.
// REQUIRES: ValidateShardConfig(config).ok().
Result<RestoredShard> ReadShardState(const std::string& path, const ShardConfig& config);

}  // namespace pstrain::server

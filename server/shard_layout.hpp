// ShardLayout: what a shard derives from the net's parameter list — the key
// placement and an empty ChunkStore of its chunks. Built from an INIT_PUSH or
// from a checkpoint; both go through MakeShardLayout, so they agree.
#pragma once

#include <optional>
#include <vector>

#include "common/ps/key_placement.hpp"
#include "common/status.hpp"
#include "proto/pstrain.pb.h"
#include "server/chunk_store.hpp"
#include "server/shard_config.hpp"

namespace pstrain::server {

struct ShardLayout {
  std::vector<pstrain::ParamMeta> params;
  KeyPlacement placement;
  std::optional<ChunkStore> store;  // always set on success; weights and history zero
};

// Errors: a parameter with a negative or absurd dimension, a non-finite
// lr_mult/decay_mult, a shard that would hold no chunk (the message says how
// many shards the net allows), an invalid solver.
// REQUIRES: ValidateShardConfig(config).ok().
Result<ShardLayout> MakeShardLayout(std::vector<pstrain::ParamMeta> params,
                                    const ShardConfig& config);

// True when both lists describe the same parameters (name, shape, lr_mult,
// decay_mult, in order).
bool SameParams(const std::vector<pstrain::ParamMeta>& a, const std::vector<pstrain::ParamMeta>& b);

}  // namespace pstrain::server

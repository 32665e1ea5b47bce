#include "server/shard_layout.hpp"

#include <cmath>

namespace pstrain::server {
namespace {

// A parameter larger than this (2^40 values, 4 TiB) is a corrupt message.
constexpr int64_t kMaxParamValues = int64_t{1} << 40;

}  // namespace

Result<ShardLayout> MakeShardLayout(std::vector<pstrain::ParamMeta> params,
                                    const ShardConfig& config) {
  std::vector<int64_t> sizes;
  std::vector<optim::ParamHyper> multipliers;
  for (const pstrain::ParamMeta& p : params) {
    int64_t size = 1;
    for (int64_t dim : p.shape()) {
      if (dim < 0 || (dim > 0 && size > kMaxParamValues / dim)) {
        return Status::Error("parameter \"" + p.name() + "\" has an invalid shape (dimension " +
                             std::to_string(dim) + ")");
      }
      size *= dim;
    }
    if (!std::isfinite(p.lr_mult()) || !std::isfinite(p.decay_mult())) {
      return Status::Error("parameter \"" + p.name() + "\" has a non-finite lr_mult or decay_mult");
    }
    sizes.push_back(size);
    multipliers.push_back(optim::ParamHyper{p.lr_mult(), p.decay_mult()});
  }
  ShardLayout layout;
  PSTRAIN_ASSIGN_OR_RETURN(layout.placement,
                           KeyPlacement::Create(sizes, config.num_shards, config.chunk_bytes));
  const size_t total = layout.placement.chunks().size();
  if (layout.placement.shard_chunks(config.shard).empty()) {
    return Status::Error("shard " + std::to_string(config.shard) + " of " +
                         std::to_string(config.num_shards) + " would hold no chunk: the net has " +
                         std::to_string(total) + " chunk(s) of at most " +
                         std::to_string(config.chunk_bytes) +
                         " bytes; use at most that many server shards or a smaller chunk_bytes");
  }
  PSTRAIN_ASSIGN_OR_RETURN(ChunkStore store, ChunkStore::Create(layout.placement, config.shard,
                                                                multipliers, config.hyper,
                                                                config.device));
  layout.store.emplace(std::move(store));
  layout.params = std::move(params);
  return layout;
}

bool SameParams(const std::vector<pstrain::ParamMeta>& a,
                const std::vector<pstrain::ParamMeta>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name() != b[i].name() || a[i].lr_mult() != b[i].lr_mult() ||
        a[i].decay_mult() != b[i].decay_mult() || a[i].shape_size() != b[i].shape_size()) {
      return false;
    }
    for (int d = 0; d < a[i].shape_size(); ++d) {
      if (a[i].shape(d) != b[i].shape(d)) return false;
    }
  }
  return true;
}

}  // namespace pstrain::server

#include "common/ps/key_placement.hpp"

#include <algorithm>
#include <numeric>

namespace pstrain {

Result<KeyPlacement> KeyPlacement::Create(const std::vector<int64_t>& param_sizes, int num_shards,
                                          int64_t chunk_bytes) {
  if (num_shards < 1) return Status::Error("the number of server shards must be at least 1");
  if (chunk_bytes < static_cast<int64_t>(sizeof(float))) {
    return Status::Error("chunk_bytes must be at least 4, got " + std::to_string(chunk_bytes));
  }
  const int64_t chunk_values = chunk_bytes / static_cast<int64_t>(sizeof(float));
  KeyPlacement placement;
  placement.param_chunks_.resize(param_sizes.size());
  for (size_t p = 0; p < param_sizes.size(); ++p) {
    if (param_sizes[p] < 0) {
      return Status::Error("parameter " + std::to_string(p) + " has a negative size");
    }
    for (int64_t offset = 0; offset < param_sizes[p]; offset += chunk_values) {
      Chunk c;
      c.id = static_cast<uint32_t>(placement.chunks_.size());
      c.param = static_cast<int>(p);
      c.offset = offset;
      c.length = std::min(chunk_values, param_sizes[p] - offset);
      placement.param_chunks_[p].push_back(c.id);
      placement.chunks_.push_back(c);
    }
  }
  std::vector<uint32_t> order(placement.chunks_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return placement.chunks_[a].length > placement.chunks_[b].length;
  });
  std::vector<int64_t> load(num_shards, 0);
  placement.shard_chunks_.resize(num_shards);
  for (uint32_t id : order) {
    const int shard = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    placement.chunks_[id].shard = shard;
    load[shard] += placement.chunks_[id].length;
    placement.shard_chunks_[shard].push_back(id);
  }
  for (auto& ids : placement.shard_chunks_) std::sort(ids.begin(), ids.end());
  return placement;
}

int64_t KeyPlacement::shard_load(int shard) const {
  int64_t total = 0;
  for (uint32_t id : shard_chunks_[shard]) total += chunks_[id].length;
  return total;
}

}  // namespace pstrain

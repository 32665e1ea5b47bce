// KeyPlacement: which server shard holds which piece of which parameter.
//
// Every learnable parameter is cut into chunks of at most chunk_bytes (the
// last chunk of a parameter may be shorter); chunk ids run in parameter
// order, then offset order. Chunks go to shards by a deterministic greedy
// balance: largest first (ties: lower id first), each to the currently
// lightest shard (ties: lower shard). Every process computes the same table
// from the same parameter sizes, so the table itself never travels.
// Balance: the heaviest shard exceeds the lightest by at most one chunk.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.hpp"

namespace pstrain {

struct Chunk {
  uint32_t id = 0;
  int param = 0;        // index into the parameter list
  int64_t offset = 0;   // first value within the parameter
  int64_t length = 0;   // values
  int shard = 0;
};

class KeyPlacement {
 public:
  // `param_sizes`: number of float values of each parameter, in order.
  // Errors: num_shards < 1, chunk_bytes < 4, a negative size.
  static Result<KeyPlacement> Create(const std::vector<int64_t>& param_sizes, int num_shards,
                                     int64_t chunk_bytes);

  const std::vector<Chunk>& chunks() const { return chunks_; }
  // REQUIRES: id < chunks().size().
  const Chunk& chunk(uint32_t id) const { return chunks_[id]; }
  // Chunk ids held by `shard`, ascending.
  const std::vector<uint32_t>& shard_chunks(int shard) const { return shard_chunks_[shard]; }
  // Chunk ids of parameter `param`, ascending.
  const std::vector<uint32_t>& param_chunks(int param) const { return param_chunks_[param]; }
  int64_t shard_load(int shard) const;  // values held
  int num_shards() const { return static_cast<int>(shard_chunks_.size()); }
  int num_params() const { return static_cast<int>(param_chunks_.size()); }

 private:
  std::vector<Chunk> chunks_;
  std::vector<std::vector<uint32_t>> shard_chunks_;
  std::vector<std::vector<uint32_t>> param_chunks_;
};

}  // namespace pstrain

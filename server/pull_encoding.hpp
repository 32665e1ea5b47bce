// PullEncoding: a shard's chunks as 16-bit pull replies (FLOAT16 or BFLOAT16,
// for workers that asked in HELLO; docs/wire-protocol.md, "16-bit pulls").
// The master weights and the update rule's history stay float32 in the
// ChunkStore; only what travels is rounded (to nearest even, by
// transport::EncodeHalves). Each chunk is encoded at most once per dtype
// between two Clear()s, so W workers served together by one step share one
// encoding; the shard clears it before the weights may change, so no stale
// encoding is ever served and the store's snapshot buffers are never held
// (the store keeps updating in place).
//
// Not thread-safe: the shard's event loop owns it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "common/status.hpp"
#include "proto/pstrain.pb.h"
#include "server/shard_layout.hpp"

namespace pstrain::server {

class PullEncoding {
 public:
  // Chunk `id`'s `weights` (its current snapshot) in `dtype`. Error
  // (FailedPrecondition) when a finite weight lies beyond the dtype's range, naming
  // the parameter and index: `weight conv1[123] = 70000 is beyond FLOAT16's
  // range (|w| < 65520 rounds to a finite value): it cannot be pulled as
  // FLOAT16; pull in bf16 or none`.
  // REQUIRES: transport::IsHalfWidth(dtype); layout holds chunk `id`;
  // weights holds its values and does not change before the next Clear().
  Result<std::shared_ptr<const std::vector<float>>> Encode(uint32_t id, pstrain::DataType dtype,
                                                           const std::vector<float>& weights,
                                                           const ShardLayout& layout);
  // Forgets every encoding (call before the weights may change).
  void Clear() { encoded_.clear(); }

 private:
  std::map<std::pair<uint32_t, int>, std::shared_ptr<const std::vector<float>>> encoded_;
};

}  // namespace pstrain::server

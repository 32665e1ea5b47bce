// EncodedGradient: one chunk of a PUSH as it travelled, float32 or compressed
// (common/transport/gradient_codec.hpp), and the decoding of any range of it.
//
// The shard never decodes a whole chunk into a buffer of its own: DecodeRange
// fills a small block (ChunkStore and RankOrderedSum use kDecodeBlock values,
// which stay in the core's L1 cache) that is summed or applied at once, so a
// compressed push costs one pass over the weights, as a float32 one does.
// Values equal transport::Decode's bit for bit (FLOAT16 through the CPU's
// F16C instructions where it has them: an exact conversion either way;
// BFLOAT16 is float32's upper half).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/pstrain.pb.h"

namespace pstrain::server {

// Values decoded per block (16 KiB of floats).
constexpr size_t kDecodeBlock = 4096;

struct EncodedGradient {
  pstrain::DataType dtype = pstrain::FLOAT32;
  const void* data = nullptr;  // the frame (4-aligned words)
  size_t bytes = 0;
  uint64_t n = 0;  // values it decodes to

  bool is_float32() const { return dtype == pstrain::FLOAT32; }
  // REQUIRES: is_float32().
  const float* floats() const { return static_cast<const float*>(data); }
};

// out[0, end - begin) = values [begin, end) of g.
// REQUIRES: CheckEncoded(g) held (the transport's Validate); begin <= end <= g.n.
void DecodeRange(const EncodedGradient& g, uint64_t begin, uint64_t end, float* out);

// Index of the first value of g that is NaN or infinite, or -1; `value` gets
// it. FLOAT16, BFLOAT16: a value with every exponent bit set; TOP_K: a sent value;
// SIGN_SCALED: never (CheckEncoded refused a non-finite scale).
int64_t FirstNonFinite(const EncodedGradient& g, float* value);

// True when this CPU converts halves with F16C (what DecodeRange uses).
bool HasF16c();

}  // namespace pstrain::server

// Compression on the wire: the payload encodings of a compressed PUSH
// (Header.dtype FLOAT16, BFLOAT16, TOP_K or SIGN_SCALED) and of a 16-bit
// PULL_REPLY (FLOAT16 or BFLOAT16; docs/wire-protocol.md).
// Every encoding is a whole number of little-endian 32-bit words, so the
// transport's 4-aligned frames carry it unchanged. Workers encode (with error
// feedback where the method has it, GradientEncoder); the server's transport
// decodes into float32 where the message enters, after CheckEncoded. A shard
// encodes a 16-bit pull reply with EncodeHalves; the worker decodes it into
// its blobs with Decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain::transport {

// A payload's values, read where they lie (no alignment assumed): word i (4
// bytes), float i, and half i (2 bytes: the low half of word i/2 when i is even).
inline uint32_t WordAt(const void* data, size_t i) {
  uint32_t w;
  std::memcpy(&w, static_cast<const char*>(data) + 4 * i, 4);
  return w;
}
inline float FloatAt(const void* data, size_t i) {
  float f;
  std::memcpy(&f, static_cast<const char*>(data) + 4 * i, 4);
  return f;
}
inline uint16_t HalfAt(const void* data, size_t i) {
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(data) + 2 * i, 2);
  return h;
}

// "none" (FLOAT32), "fp16", "bf16", "topk", "sign".
Result<pstrain::DataType> ParseCompression(const std::string& name);
const char* CompressionName(pstrain::DataType dtype);
// Pulls: "none" (FLOAT32), "fp16", "bf16". Error:
// `pull compression "topk" is not one of none, fp16, bf16`.
Result<pstrain::DataType> ParsePullCompression(const std::string& name);
// FLOAT16 or BFLOAT16: two values a 32-bit word.
bool IsHalfWidth(pstrain::DataType dtype);

// Ok when `bytes` bytes at `data` are a valid encoding of `n` values in
// `dtype` (sizes, k <= n, indices ascending and < n, a finite scale >= 0).
// Errors name what is wrong ("TOP_K index 7 after 9").
Status CheckEncoded(pstrain::DataType dtype, const void* data, size_t bytes, uint64_t n);

// Decodes into out[0..n). REQUIRES: CheckEncoded(dtype, data, bytes, n).ok().
void Decode(pstrain::DataType dtype, const void* data, size_t bytes, uint64_t n, float* out);

// IEEE 754 binary16, round to nearest even (overflow to infinity), and back.
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);
// bfloat16 (float32's sign, exponent and top 7 mantissa bits), round to
// nearest even (a finite value past 3.3895e38 rounds to infinity); a NaN
// stays a NaN (quiet, sign kept). BFloat16ToFloat is exact.
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bits);

// Encodes values[0..n) in `dtype` (FLOAT16 or BFLOAT16) into `words`
// (resized to ceil(n/2); value 2j in the low half of word j). Returns n, or
// the index of the first finite value that rounded to infinity (beyond the
// encoding's range: |v| >= 65520 in fp16); the encoding is complete either
// way. Infinities and NaNs stay what they are.
// REQUIRES: IsHalfWidth(dtype).
size_t EncodeHalves(pstrain::DataType dtype, const float* values, size_t n,
                    std::vector<float>* words);

// One chunk's encoder with its error-feedback residual (top-k and sign keep
// what the encoding lost and add it to the next gradient of the chunk, as in
// Lin et al. 2018 and Karimireddy et al. 2019; fp16 and bf16 keep none: a
// value beyond the 16-bit range is sent as infinity, which the shard refuses
// as any non-finite gradient).
class GradientEncoder {
 public:
  // topk_ratio in (0, 1]: k = max(1, round(ratio * n)) values are sent.
  GradientEncoder(pstrain::DataType dtype, size_t n, double topk_ratio, bool error_feedback);
  // Encodes grad[0..n) into `words` (resized); updates the residual.
  void Encode(const float* grad, std::vector<float>* words);
  const std::vector<float>& residual() const { return residual_; }

 private:
  pstrain::DataType dtype_;
  size_t n_;
  size_t k_;
  bool feedback_;
  std::vector<float> residual_;   // empty without error feedback
  std::vector<float> corrected_;  // grad + residual
  std::vector<uint32_t> order_;   // top-k scratch
};

}  // namespace pstrain::transport

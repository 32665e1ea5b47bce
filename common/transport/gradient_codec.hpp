// Gradient compression on the wire: the payload encodings of a compressed
// PUSH (Header.dtype FLOAT16, TOP_K or SIGN_SCALED; docs/wire-protocol.md).
// Every encoding is a whole number of little-endian 32-bit words, so the
// transport's 4-aligned frames carry it unchanged. Workers encode (with error
// feedback where the method has it, GradientEncoder); the server's transport
// decodes into float32 where the message enters, after CheckEncoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain::transport {

// "none" (FLOAT32), "fp16", "topk", "sign".
Result<pstrain::DataType> ParseCompression(const std::string& name);
const char* CompressionName(pstrain::DataType dtype);

// Ok when `bytes` bytes at `data` are a valid encoding of `n` values in
// `dtype` (sizes, k <= n, indices ascending and < n, a finite scale >= 0).
// Errors name what is wrong ("TOP_K index 7 after 9").
Status CheckEncoded(pstrain::DataType dtype, const void* data, size_t bytes, uint64_t n);

// Decodes into out[0..n). REQUIRES: CheckEncoded(dtype, data, bytes, n).ok().
void Decode(pstrain::DataType dtype, const void* data, size_t bytes, uint64_t n, float* out);

// IEEE 754 binary16, round to nearest even (overflow to infinity), and back.
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);

// One chunk's encoder with its error-feedback residual (top-k and sign keep
// what the encoding lost and add it to the next gradient of the chunk, as in
// Lin et al. 2018 and Karimireddy et al. 2019; fp16 keeps none).
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

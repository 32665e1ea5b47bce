// Sufficient factors (Poseidon): the gradient of a fully connected layer's
// weight W (rows x cols, row-major) over a batch is G = L^T R, L the batch's
// samples x rows, R samples x cols (Caffe's InnerProduct: L = top diff, R =
// bottom data; with transpose, L = bottom data, R = top diff). When
// samples x (rows + cols) < rows x cols, L and R are fewer bytes than G.
//
// The geometry shared by the worker that sends factors (worker/ps), the check
// of a PUSH that carries them (common/transport/validate.cpp) and the shard
// that rebuilds each chunk's values (common/ps/factor_rebuild.hpp). A chunk
// is a contiguous range of the flattened weight: whole rows, plus partial
// rows at its edges. docs/wire-protocol.md, "Sufficient factors".
#pragma once

#include <cstdint>
#include <vector>

#include "common/ps/key_placement.hpp"
#include "common/status.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain {

// Weight rows [begin, end).
struct WeightRows {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t count() const { return end - begin; }
};

// The rows of a weight with rows of `cols` values that chunk `c` touches.
// REQUIRES: cols >= 1, c.length >= 1.
WeightRows ChunkRows(const Chunk& c, int64_t cols);
// The smallest row range holding every chunk of `ids` (non-empty).
WeightRows SpanRows(const KeyPlacement& placement, const std::vector<uint32_t>& ids, int64_t cols);
// Values of parameter `param` (the sum of its chunks).
int64_t ParamSize(const KeyPlacement& placement, int param);

// The encodings factors travel in (Header.dtype of a PUSH with factors,
// RelayedFactors.dtype): FLOAT32, FLOAT16 and BFLOAT16, the 16-bit ones as
// common/transport/gradient_codec.hpp encodes a chunk (two values a 32-bit
// word, value 2j in the low half of word j, the last word's high half 0 for
// an odd count).
bool IsFactorDtype(pstrain::DataType dtype);
// The dtype a worker pushing gradients in `compression` sends factors in:
// FLOAT16 and BFLOAT16 as they are, anything else FLOAT32 (TOP_K and
// SIGN_SCALED encode a gradient, not its factors).
pstrain::DataType FactorDtype(pstrain::DataType compression);
// Bytes of one frame of `values` factors in `dtype` (IsFactorDtype): 4 a
// value in FLOAT32, 4 per two values (rounded up) in the 16-bit ones.
int64_t FactorFrameBytes(pstrain::DataType dtype, int64_t values);

// Payload bytes of the factors of `samples` rows covering `rows` in `dtype`:
// L's columns `rows` and all of R, one frame each.
int64_t FactorBytes(int64_t samples, WeightRows rows, int64_t cols, pstrain::DataType dtype);

// A frame of n factors in `dtype`: EncodeFactors writes it into `words`
// (resized to FactorFrameBytes / 4; the 16-bit ones rounded to nearest even,
// a finite value beyond FLOAT16's range becoming infinity, which the shard
// then refuses as any non-finite gradient). DecodeFactors returns the n
// float32 values of `frame`: the frame itself for FLOAT32, else `scratch`
// (resized) holding them decoded -- exactly, so every process that decodes
// the same bytes gets the same floats.
// REQUIRES: IsFactorDtype(dtype); DecodeFactors: frame holds
// FactorFrameBytes(dtype, n) bytes, 4-aligned.
void EncodeFactors(pstrain::DataType dtype, const float* values, size_t n,
                   std::vector<float>* words);
const float* DecodeFactors(pstrain::DataType dtype, const float* frame, size_t n,
                           std::vector<float>* scratch);

// A PUSH with Header.factors against `placement` (null: before the init push,
// only the header's own consistency) and its two frames' byte sizes
// (right_bytes unused with FactorShape.right_forwarded, which needs relay:
// "factors: right_forwarded without relay (R is forwarded under factor
// broadcast only)"). Errors
// name the field or chunk: "factors with dtype TOP_K (they travel as FLOAT32,
// FLOAT16 or BFLOAT16)", "factors: left frame has 60 bytes, 2 x 3 float32
// need 24" ("2 x 3 FLOAT16 need 12" in 16 bits), "factors: chunk 3 is of
// parameter 1, chunk 2 of parameter 0", "factors: chunk 4 (values [6, 12))
// is outside rows [0, 1) of 6 values".
Status CheckFactors(const pstrain::Header& h, size_t left_bytes, size_t right_bytes,
                    const KeyPlacement* placement);

}  // namespace pstrain

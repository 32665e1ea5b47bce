#include "common/ps/sufficient_factors.hpp"

#include <algorithm>
#include <string>

#include "common/transport/gradient_codec.hpp"

namespace pstrain {

using std::to_string;

WeightRows ChunkRows(const Chunk& c, int64_t cols) {
  return {c.offset / cols, (c.offset + c.length - 1) / cols + 1};
}

WeightRows SpanRows(const KeyPlacement& placement, const std::vector<uint32_t>& ids, int64_t cols) {
  WeightRows span = ChunkRows(placement.chunk(ids.front()), cols);
  for (uint32_t id : ids) {
    const WeightRows r = ChunkRows(placement.chunk(id), cols);
    span.begin = std::min(span.begin, r.begin);
    span.end = std::max(span.end, r.end);
  }
  return span;
}

int64_t ParamSize(const KeyPlacement& placement, int param) {
  const std::vector<uint32_t>& ids = placement.param_chunks(param);
  if (ids.empty()) return 0;
  const Chunk& last = placement.chunk(ids.back());
  return last.offset + last.length;
}

bool IsFactorDtype(pstrain::DataType dtype) {
  return dtype == pstrain::FLOAT32 || transport::IsHalfWidth(dtype);
}

pstrain::DataType FactorDtype(pstrain::DataType compression) {
  return transport::IsHalfWidth(compression) ? compression : pstrain::FLOAT32;
}

int64_t FactorFrameBytes(pstrain::DataType dtype, int64_t values) {
  return dtype == pstrain::FLOAT32 ? values * 4 : (values + 1) / 2 * 4;
}

int64_t FactorBytes(int64_t samples, WeightRows rows, int64_t cols, pstrain::DataType dtype) {
  return FactorFrameBytes(dtype, samples * rows.count()) + FactorFrameBytes(dtype, samples * cols);
}

void EncodeFactors(pstrain::DataType dtype, const float* values, size_t n,
                   std::vector<float>* words) {
  if (dtype == pstrain::FLOAT32) {
    words->assign(values, values + n);
    return;
  }
  transport::EncodeHalves(dtype, values, n, words);
}

const float* DecodeFactors(pstrain::DataType dtype, const float* frame, size_t n,
                           std::vector<float>* scratch) {
  if (dtype == pstrain::FLOAT32) return frame;
  scratch->resize(n);
  transport::Decode(dtype, frame, static_cast<size_t>(FactorFrameBytes(dtype, n)), n,
                    scratch->data());
  return scratch->data();
}

namespace {

// "2 x 3 float32 need 24" (FLOAT16 / BFLOAT16: "2 x 3 FLOAT16 need 12")
// against the frame's size.
Status CheckFrame(const char* which, size_t bytes, uint64_t a, uint64_t b,
                  pstrain::DataType dtype) {
  // a, b < 2^32: a * b < 2^64, but * 4 may overflow.
  const uint64_t values = a * b;
  const bool half = dtype != pstrain::FLOAT32;
  const uint64_t need = half ? (values / 2 + values % 2) * 4 : values * sizeof(float);
  if ((!half && values > UINT64_MAX / sizeof(float)) || bytes != need) {
    return Status::InvalidArgument(
        "factors: " + std::string(which) + " frame has " + to_string(bytes) + " bytes, " +
        to_string(a) + " x " + to_string(b) + " " +
        (half ? pstrain::DataType_Name(dtype) : "float32") + " need " + to_string(need));
  }
  return Status::Ok();
}

}  // namespace

Status CheckFactors(const pstrain::Header& h, size_t left_bytes, size_t right_bytes,
                    const KeyPlacement* placement) {
  const pstrain::FactorShape& f = h.factors();
  if (h.type() != pstrain::PUSH) {
    return Status::InvalidArgument("factors in a " + pstrain::MessageType_Name(h.type()) +
                                   " (only a PUSH carries them)");
  }
  if (!IsFactorDtype(h.dtype())) {
    return Status::InvalidArgument("factors with dtype " + pstrain::DataType_Name(h.dtype()) +
                                   " (they travel as FLOAT32, FLOAT16 or BFLOAT16)");
  }
  if (f.samples() == 0 || f.cols() == 0 || f.row_end() <= f.row_begin()) {
    return Status::InvalidArgument("factors: samples " + to_string(f.samples()) + ", rows [" +
                                   to_string(f.row_begin()) + ", " + to_string(f.row_end()) +
                                   "), cols " + to_string(f.cols()) + " (each must be at least 1)");
  }
  if (h.chunks_size() == 0) return Status::InvalidArgument("factors for no chunk");
  PSTRAIN_RETURN_IF_ERROR(
      CheckFrame("left", left_bytes, f.samples(), f.row_end() - f.row_begin(), h.dtype()));
  if (f.right_forwarded() && !f.relay()) {
    return Status::InvalidArgument(
        "factors: right_forwarded without relay (R is forwarded under factor broadcast only)");
  }
  if (!f.right_forwarded()) {  // with right_forwarded R comes in a FACTOR_RIGHT
    PSTRAIN_RETURN_IF_ERROR(CheckFrame("right", right_bytes, f.samples(), f.cols(), h.dtype()));
  }
  if (placement == nullptr) return Status::Ok();
  const uint32_t first = h.chunks(0).id();
  const int param = placement->chunk(first).param;  // the chunk list was checked before
  const int64_t size = ParamSize(*placement, param);
  const int64_t cols = f.cols();
  if (size % cols != 0 || static_cast<int64_t>(f.row_end()) > size / cols) {
    return Status::InvalidArgument("factors: parameter " + to_string(param) + " has " +
                                   to_string(size) + " values, not rows of " + to_string(cols) +
                                   " up to row " + to_string(f.row_end()));
  }
  for (const pstrain::ChunkRef& ref : h.chunks()) {
    const Chunk& c = placement->chunk(ref.id());
    if (c.param != param) {
      return Status::InvalidArgument("factors: chunk " + to_string(ref.id()) + " is of parameter " +
                                     to_string(c.param) + ", chunk " + to_string(first) +
                                     " of parameter " + to_string(param));
    }
    const WeightRows rows = ChunkRows(c, cols);
    if (rows.begin < f.row_begin() || rows.end > f.row_end()) {
      return Status::InvalidArgument(
          "factors: chunk " + to_string(ref.id()) + " (values [" + to_string(c.offset) + ", " +
          to_string(c.offset + c.length) + ")) is outside rows [" + to_string(f.row_begin()) +
          ", " + to_string(f.row_end()) + ") of " + to_string(cols) + " values");
    }
  }
  return Status::Ok();
}

}  // namespace pstrain

#include "common/ps/sufficient_factors.hpp"

#include <algorithm>
#include <string>

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

int64_t FactorBytes(int64_t samples, WeightRows rows, int64_t cols) {
  return samples * (rows.count() + cols) * static_cast<int64_t>(sizeof(float));
}

namespace {

// "2 x 3 float32 need 24" against the frame's size.
Status CheckFrame(const char* which, size_t bytes, uint64_t a, uint64_t b) {
  // a, b < 2^32: a * b < 2^64, but * 4 may overflow.
  const uint64_t values = a * b;
  if (values > UINT64_MAX / sizeof(float) || bytes != values * sizeof(float)) {
    return Status::InvalidArgument(
        "factors: " + std::string(which) + " frame has " + to_string(bytes) + " bytes, " +
        to_string(a) + " x " + to_string(b) + " float32 need " + to_string(values * sizeof(float)));
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
  if (h.dtype() != pstrain::FLOAT32) {
    return Status::InvalidArgument("factors with dtype " + pstrain::DataType_Name(h.dtype()) +
                                   " (they travel as FLOAT32)");
  }
  if (f.samples() == 0 || f.cols() == 0 || f.row_end() <= f.row_begin()) {
    return Status::InvalidArgument("factors: samples " + to_string(f.samples()) + ", rows [" +
                                   to_string(f.row_begin()) + ", " + to_string(f.row_end()) +
                                   "), cols " + to_string(f.cols()) + " (each must be at least 1)");
  }
  if (h.chunks_size() == 0) return Status::InvalidArgument("factors for no chunk");
  PSTRAIN_RETURN_IF_ERROR(CheckFrame("left", left_bytes, f.samples(), f.row_end() - f.row_begin()));
  PSTRAIN_RETURN_IF_ERROR(CheckFrame("right", right_bytes, f.samples(), f.cols()));
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

// Blob: an N-D float32 tensor with a value (data) and a gradient (diff).
//
// Shapes are vectors of non-negative ints (at most kMaxAxes axes). Reshape
// keeps storage when the new count fits, so per-iteration reshapes do not
// allocate. Data and diff may be shared with another blob (ShareData /
// ShareDiff); sharing is how in-place layers and shared weights work.
// In CUDA builds data and diff also have device copies (gpu_data and
// friends), synchronised lazily with the host copies (see SyncedMemory):
// cpu_ accessors always see the latest values, wherever they were written.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "common/synced_memory.hpp"

namespace caffe {
class BlobProto;
class BlobShape;
}  // namespace caffe

namespace pstrain {

class Blob {
 public:
  static constexpr int kMaxAxes = 32;

  Blob() = default;
  explicit Blob(const std::vector<int>& shape) { Reshape(shape); }
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  // REQUIRES: every dimension >= 0 and at most kMaxAxes axes (checked).
  void Reshape(const std::vector<int>& shape);
  void ReshapeLike(const Blob& other) { Reshape(other.shape()); }

  const std::vector<int>& shape() const { return shape_; }
  // Negative axes count from the end. REQUIRES: -num_axes() <= axis < num_axes().
  int shape(int axis) const { return shape_[CanonicalAxisIndex(axis)]; }
  int num_axes() const { return static_cast<int>(shape_.size()); }
  int64_t count() const { return count_; }
  // Product of dimensions [start, end).
  int64_t count(int start, int end) const;
  int64_t count(int start) const { return count(start, num_axes()); }
  int CanonicalAxisIndex(int axis) const;
  std::string shape_string() const;  // "64 1 28 28 (50176)"

  // Caffe's 4-D accessors; missing axes read as 1.
  int num() const { return LegacyShape(0); }
  int channels() const { return LegacyShape(1); }
  int height() const { return LegacyShape(2); }
  int width() const { return LegacyShape(3); }
  int LegacyShape(int index) const;

  const float* cpu_data() const;
  const float* cpu_diff() const;
  float* mutable_cpu_data();
  float* mutable_cpu_diff();
#ifdef PSTRAIN_HAVE_CUDA
  const float* gpu_data() const;
  const float* gpu_diff() const;
  float* mutable_gpu_data();
  float* mutable_gpu_diff();
#endif
  // The storage behind data and diff (null before the first Reshape).
  SyncedMemory* data_memory() const { return data_.get(); }
  SyncedMemory* diff_memory() const { return diff_.get(); }
  // The same storage, shared: a holder keeps it alive after the blob is gone
  // (the numpy views of pstrain._core).
  std::shared_ptr<SyncedMemory> shared_data_memory() const { return data_; }
  std::shared_ptr<SyncedMemory> shared_diff_memory() const { return diff_; }

  // Makes this blob use `other`'s storage. REQUIRES: equal count.
  void ShareData(const Blob& other);
  void ShareDiff(const Blob& other);
  bool SharesDataWith(const Blob& other) const { return data_ == other.data_; }

  // CopyFrom and SetDiffZero work on the device when the values live there
  // (CUDA builds), on the host otherwise; SumSquares reads the host copy.
  void CopyFrom(const Blob& source, bool copy_diff = false, bool reshape = false);
  void SetDiffZero();
  double SumSquaresData() const;
  double SumSquaresDiff() const;

  // Loads values from a BlobProto (shape field or legacy num/channels/height/
  // width). With reshape=false the shapes must agree; the error names both.
  Status FromProto(const caffe::BlobProto& proto, bool reshape);
  void ToProto(caffe::BlobProto* proto, bool write_diff = false) const;

 private:
  std::vector<int> shape_;
  int64_t count_ = 0;
  int64_t capacity_ = 0;
  std::shared_ptr<SyncedMemory> data_;
  std::shared_ptr<SyncedMemory> diff_;
};

// Shape from a BlobShape message, checked (no negative dims, fits in int).
Result<std::vector<int>> ShapeFromProto(const caffe::BlobShape& shape);
std::string ShapeString(const std::vector<int>& shape);

}  // namespace pstrain

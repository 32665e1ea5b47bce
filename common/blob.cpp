#include "common/blob.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

#include "proto/caffe.pb.h"

#ifdef PSTRAIN_HAVE_CUDA
#include "common/cuda/math_gpu.hpp"
#endif

namespace pstrain {

std::string ShapeString(const std::vector<int>& shape) {
  std::ostringstream out;
  int64_t count = 1;
  for (int d : shape) {
    out << d << " ";
    count *= d;
  }
  out << "(" << count << ")";
  return out.str();
}

void Blob::Reshape(const std::vector<int>& shape) {
  PSTRAIN_CHECK(shape.size() <= static_cast<size_t>(kMaxAxes));
  int64_t count = 1;
  for (int d : shape) {
    PSTRAIN_CHECK_MSG(d >= 0, ShapeString(shape));
    count *= d;
  }
  shape_ = shape;
  count_ = count;
  if (count_ > capacity_ || !data_) {
    capacity_ = count_;
    data_ = std::make_shared<SyncedMemory>(capacity_);
    diff_ = std::make_shared<SyncedMemory>(capacity_);
  }
}

int64_t Blob::count(int start, int end) const {
  PSTRAIN_CHECK(0 <= start && start <= end && end <= num_axes());
  int64_t n = 1;
  for (int i = start; i < end; ++i) n *= shape_[i];
  return n;
}

int Blob::CanonicalAxisIndex(int axis) const {
  PSTRAIN_CHECK_MSG(axis >= -num_axes() && axis < num_axes(),
                    "axis " + std::to_string(axis) + " of blob " + shape_string());
  return axis < 0 ? axis + num_axes() : axis;
}

int Blob::LegacyShape(int index) const {
  if (index >= num_axes()) return 1;
  return shape_[index];
}

std::string Blob::shape_string() const { return ShapeString(shape_); }

const float* Blob::cpu_data() const { return data_ ? data_->host_data() : nullptr; }
const float* Blob::cpu_diff() const { return diff_ ? diff_->host_data() : nullptr; }
float* Blob::mutable_cpu_data() { return data_ ? data_->mutable_host_data() : nullptr; }
float* Blob::mutable_cpu_diff() { return diff_ ? diff_->mutable_host_data() : nullptr; }

#ifdef PSTRAIN_HAVE_CUDA
const float* Blob::gpu_data() const { return data_ ? data_->device_data() : nullptr; }
const float* Blob::gpu_diff() const { return diff_ ? diff_->device_data() : nullptr; }
float* Blob::mutable_gpu_data() { return data_ ? data_->mutable_device_data() : nullptr; }
float* Blob::mutable_gpu_diff() { return diff_ ? diff_->mutable_device_data() : nullptr; }

using Head = SyncedMemory::Head;

// Copy on the device when the source's latest values are only there, or when
// both sides already hold device copies; otherwise on the host.
static bool CopyOnDevice(const SyncedMemory& source, const SyncedMemory& dest) {
  if (source.head() == Head::kAtDevice) return true;
  return source.head() == Head::kSynced &&
         (dest.head() == Head::kAtDevice || dest.head() == Head::kSynced);
}
#endif

void Blob::ShareData(const Blob& other) {
  PSTRAIN_CHECK(count_ == other.count_);
  data_ = other.data_;
}

void Blob::ShareDiff(const Blob& other) {
  PSTRAIN_CHECK(count_ == other.count_);
  diff_ = other.diff_;
}

void Blob::CopyFrom(const Blob& source, bool copy_diff, bool reshape) {
  if (reshape) ReshapeLike(source);
  PSTRAIN_CHECK_MSG(count_ == source.count_, shape_string() + " vs " + source.shape_string());
  if (count_ == 0) return;
#ifdef PSTRAIN_HAVE_CUDA
  if (CopyOnDevice(copy_diff ? *source.diff_ : *source.data_, copy_diff ? *diff_ : *data_)) {
    if (copy_diff) {
      GpuCopy(count_, source.gpu_diff(), mutable_gpu_diff());
    } else {
      GpuCopy(count_, source.gpu_data(), mutable_gpu_data());
    }
    return;
  }
#endif
  if (copy_diff) {
    std::memcpy(mutable_cpu_diff(), source.cpu_diff(), count_ * sizeof(float));
  } else {
    std::memcpy(mutable_cpu_data(), source.cpu_data(), count_ * sizeof(float));
  }
}

void Blob::SetDiffZero() {
#ifdef PSTRAIN_HAVE_CUDA
  if (count_ > 0 && (diff_->head() == Head::kAtDevice || diff_->head() == Head::kSynced)) {
    GpuSet(count_, 0.f, mutable_gpu_diff());
    return;
  }
#endif
  if (count_ > 0) std::memset(mutable_cpu_diff(), 0, count_ * sizeof(float));
}

static double SumSquares(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

double Blob::SumSquaresData() const { return count_ ? SumSquares(cpu_data(), count_) : 0.0; }
double Blob::SumSquaresDiff() const { return count_ ? SumSquares(cpu_diff(), count_) : 0.0; }

Result<std::vector<int>> ShapeFromProto(const caffe::BlobShape& shape) {
  if (shape.dim_size() > Blob::kMaxAxes) {
    return Status::Error("blob shape has " + std::to_string(shape.dim_size()) +
                         " axes; at most " + std::to_string(Blob::kMaxAxes) + " are supported");
  }
  std::vector<int> dims;
  int64_t count = 1;
  for (int64_t d : shape.dim()) {
    if (d < 0 || d > INT32_MAX) {
      return Status::Error("blob shape has a bad dimension " + std::to_string(d));
    }
    count *= d;
    if (count > INT32_MAX) return Status::Error("blob shape has more than 2^31 elements");
    dims.push_back(static_cast<int>(d));
  }
  return dims;
}

// Caffe's legacy 4-D blobs (num/channels/height/width) match a blob of up to 4
// axes whose shape, padded with 1s on the left, equals them.
static bool LegacyShapeMatches(const std::vector<int>& legacy, const std::vector<int>& shape) {
  if (shape.size() > 4) return false;
  std::vector<int> padded(4 - shape.size(), 1);
  padded.insert(padded.end(), shape.begin(), shape.end());
  return padded == legacy;
}

Status Blob::FromProto(const caffe::BlobProto& proto, bool reshape) {
  std::vector<int> shape;
  const bool legacy =
      proto.has_num() || proto.has_channels() || proto.has_height() || proto.has_width();
  if (legacy) {
    shape = {proto.num(), proto.channels(), proto.height(), proto.width()};
    for (int d : shape) {
      if (d < 0) return Status::Error("blob has a negative legacy dimension");
    }
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(shape, ShapeFromProto(proto.shape()));
  }
  if (reshape) {
    Reshape(shape);
  } else if (legacy ? !LegacyShapeMatches(shape, shape_) : shape != shape_) {
    return Status::Error("shape mismatch: the file has " + ShapeString(shape) + ", the net has " +
                         shape_string());
  }
  const bool has_double = proto.double_data_size() > 0;
  const int64_t n_data = has_double ? proto.double_data_size() : proto.data_size();
  if (n_data != count_) {
    return Status::Error("blob holds " + std::to_string(n_data) + " values for shape " +
                         ShapeString(shape));
  }
  float* data = mutable_cpu_data();
  for (int64_t i = 0; i < count_; ++i) {
    data[i] = has_double ? static_cast<float>(proto.double_data(i)) : proto.data(i);
  }
  const int64_t n_diff = proto.double_diff_size() > 0 ? proto.double_diff_size() : proto.diff_size();
  if (n_diff == count_) {
    float* diff = mutable_cpu_diff();
    for (int64_t i = 0; i < count_; ++i) {
      diff[i] = proto.double_diff_size() > 0 ? static_cast<float>(proto.double_diff(i))
                                             : proto.diff(i);
    }
  }
  return Status::Ok();
}

void Blob::ToProto(caffe::BlobProto* proto, bool write_diff) const {
  proto->Clear();
  for (int d : shape_) proto->mutable_shape()->add_dim(d);
  proto->mutable_data()->Resize(static_cast<int>(count_), 0.f);
  if (count_) std::memcpy(proto->mutable_data()->mutable_data(), cpu_data(), count_ * sizeof(float));
  if (write_diff) {
    proto->mutable_diff()->Resize(static_cast<int>(count_), 0.f);
    if (count_) {
      std::memcpy(proto->mutable_diff()->mutable_data(), cpu_diff(), count_ * sizeof(float));
    }
  }
}

}  // namespace pstrain

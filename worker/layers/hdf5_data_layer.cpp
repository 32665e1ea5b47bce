#include "worker/layers/hdf5_data_layer.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>

#include "worker/data/hdf5_file.hpp"
#include "worker/data/sample_order.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status Hdf5DataLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& top) {
  const caffe::HDF5DataParameter& p = param_.hdf5_data_param();
  if (param_.has_transform_param()) {
    return Status::InvalidArgument("HDF5Data does not transform data; remove transform_param");
  }
  if (p.source().empty()) return Status::InvalidArgument("hdf5_data_param.source must be given");
  if (p.batch_size() == 0 || p.batch_size() > static_cast<uint32_t>(INT32_MAX)) {
    return Status::InvalidArgument("hdf5_data_param.batch_size must be in [1, 2147483647], got " +
                                   std::to_string(p.batch_size()));
  }
  if (context().world_size < 1 || context().rank < 0 || context().rank >= context().world_size) {
    return Status::Error("bad worker rank " + std::to_string(context().rank) + " of " +
                         std::to_string(context().world_size));
  }
  if (context().start_iter < 0) return Status::Error("start_iter must be >= 0");
  batch_size_ = static_cast<int>(p.batch_size());
  shuffle_ = p.shuffle();
  seed_ = MixSeed(context().seed, std::hash<std::string>{}(name()));

  std::ifstream list(p.source());
  if (!list) return Status::NotFound(p.source() + ": cannot open the list of HDF5 files");
  files_.clear();
  for (std::string file; list >> file;) files_.push_back(file);
  if (files_.empty()) return Status::InvalidArgument(p.source() + ": lists no HDF5 file");

  rows_.clear();
  row_shape_.assign(top.size(), {});
  total_rows_ = 0;
  for (size_t f = 0; f < files_.size(); ++f) {
    auto opened = Hdf5Reader::Open(files_[f]);
    if (!opened.ok()) return opened.status().WithContext(p.source());
    const Hdf5Reader& file = *opened.value();
    int64_t rows = -1;
    for (size_t i = 0; i < top.size(); ++i) {
      const std::string& dataset = param_.top(static_cast<int>(i));
      auto shape = file.Shape(dataset);
      if (!shape.ok()) return shape.status().WithContext(p.source());
      const std::vector<int> row(shape.value().begin() + 1, shape.value().end());
      const std::string where = p.source() + ": " + files_[f] + ": dataset '" + dataset + "'";
      if (shape.value()[0] == 0) return Status::InvalidArgument(where + " has no rows");
      if (i == 0) {
        rows = shape.value()[0];
      } else if (shape.value()[0] != rows) {
        return Status::InvalidArgument(where + " has " + std::to_string(shape.value()[0]) +
                                       " rows but dataset '" + param_.top(0) + "' has " +
                                       std::to_string(rows));
      }
      if (f == 0) {
        row_shape_[i] = row;
      } else if (row != row_shape_[i]) {
        Blob want(row_shape_[i]), got(row);
        return Status::InvalidArgument(where + " has rows of shape " + got.shape_string() +
                                       " but the first file's (" + files_[0] + ") are " +
                                       want.shape_string());
      }
    }
    rows_.push_back(rows);
    total_rows_ += rows;
  }
  row_size_.clear();
  for (const auto& row : row_shape_) {
    int64_t n = 1;
    for (int d : row) n *= d;
    row_size_.push_back(n);
  }
  ordered_epoch_ = -1;
  loaded_epoch_ = -1;
  loaded_file_ = -1;
  StartStream();
  return Status::Ok();
}

Status Hdf5DataLayer::Reshape(const BlobVec& /*bottom*/, const BlobVec& top) {
  for (size_t i = 0; i < top.size(); ++i) {
    std::vector<int> shape = {batch_size_};
    shape.insert(shape.end(), row_shape_[i].begin(), row_shape_[i].end());
    top[i]->Reshape(shape);
  }
  return Status::Ok();
}

void Hdf5DataLayer::OrderFiles(int64_t epoch) {
  if (ordered_epoch_ == epoch) return;
  const int64_t n = static_cast<int64_t>(files_.size());
  if (shuffle_) {
    file_order_ = SeededPermutation(n, MixSeed(seed_, static_cast<uint64_t>(2 * epoch)));
  } else {
    file_order_.resize(static_cast<size_t>(n));
    for (int64_t f = 0; f < n; ++f) file_order_[static_cast<size_t>(f)] = f;
  }
  file_start_.clear();
  int64_t start = 0;
  for (int64_t f : file_order_) {
    file_start_.push_back(start);
    start += rows_[static_cast<size_t>(f)];
  }
  ordered_epoch_ = epoch;
}

Status Hdf5DataLayer::Load(int64_t epoch, int file) {
  if (loaded_file_ == file && (loaded_epoch_ == epoch || !shuffle_)) return Status::Ok();
  const std::string& path = files_[static_cast<size_t>(file)];
  if (loaded_file_ != file) {
    loaded_file_ = -1;
    auto opened = Hdf5Reader::Open(path);
    if (!opened.ok()) return opened.status();
    loaded_.resize(row_shape_.size());
    for (size_t i = 0; i < row_shape_.size(); ++i) {
      const std::string& dataset = param_.top(static_cast<int>(i));
      PSTRAIN_ASSIGN_OR_RETURN(std::vector<int> shape, opened.value()->Shape(dataset));
      const std::vector<int> row(shape.begin() + 1, shape.end());
      if (shape[0] != rows_[static_cast<size_t>(file)] || row != row_shape_[i]) {
        Blob got(shape);
        return Status::Corruption(path + ": dataset '" + dataset + "' changed since set-up (now " +
                                  got.shape_string() + ")");
      }
      PSTRAIN_RETURN_IF_ERROR(opened.value()->Read(dataset, &loaded_[i]));
    }
  }
  const int64_t rows = rows_[static_cast<size_t>(file)];
  if (shuffle_) {
    row_order_ = SeededPermutation(
        rows, MixSeed(MixSeed(seed_, static_cast<uint64_t>(2 * epoch + 1)), file));
  } else {
    row_order_.resize(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) row_order_[static_cast<size_t>(r)] = r;
  }
  loaded_file_ = file;
  loaded_epoch_ = epoch;
  return Status::Ok();
}

Status Hdf5DataLayer::ReadBatch(int64_t t, const BlobVec& top) {
  const int64_t first = (t * context().world_size + context().rank) * int64_t{batch_size_};
  for (int n = 0; n < batch_size_; ++n) {
    const int64_t p = first + n;
    const int64_t epoch = p / total_rows_;
    const int64_t offset = p % total_rows_;
    OrderFiles(epoch);
    const size_t k = static_cast<size_t>(
        std::upper_bound(file_start_.begin(), file_start_.end(), offset) - file_start_.begin() - 1);
    const int file = static_cast<int>(file_order_[k]);
    PSTRAIN_RETURN_IF_ERROR(Load(epoch, file));
    const int64_t row = row_order_[static_cast<size_t>(offset - file_start_[k])];
    for (size_t i = 0; i < top.size(); ++i) {
      const float* src = loaded_[i].data() + row * row_size_[i];
      std::memcpy(top[i]->mutable_cpu_data() + n * row_size_[i], src,
                  static_cast<size_t>(row_size_[i]) * sizeof(float));
    }
  }
  set_delivered_first(first);
  return Status::Ok();
}

PSTRAIN_REGISTER_LAYER("HDF5Data", Hdf5DataLayer);

}  // namespace pstrain

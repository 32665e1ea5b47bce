#include "worker/layers/memory_data_layer.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status MemoryDataLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& top) {
  data_file_.reset();
  labels_file_.reset();
  const auto files =
      std::find_if(context_.memory_data_files.begin(), context_.memory_data_files.end(),
                   [&](const MemoryDataFiles& f) { return f.layer == name(); });
  const bool from_files = files != context_.memory_data_files.end();
  if (!from_files && !context_.memory_data_from_caller) {
    return Status::InvalidArgument(
        "MemoryData takes its samples from arrays handed over in Python (pstrain.caffe's "
        "Net.set_input_arrays) or from .npy files (ps-net's and ps-worker's --memory-data " +
        name() +
        "=DATA.npy,LABELS.npy); ps-net and ps-train jobs have none to give it otherwise (use a "
        "Data layer over an LMDB, --memory-data, or pstrain.caffe)");
  }
  const caffe::MemoryDataParameter& p = param_.memory_data_param();
  const struct {
    const char* name;
    bool given;
    uint32_t value;
    int* out;
  } fields[] = {{"batch_size", p.has_batch_size(), p.batch_size(), &batch_size_},
                {"channels", p.has_channels(), p.channels(), &channels_},
                {"height", p.has_height(), p.height(), &height_},
                {"width", p.has_width(), p.width(), &width_}};
  for (const auto& f : fields) {
    if (!f.given || f.value == 0 || f.value > static_cast<uint32_t>(kMaxBlobValues)) {
      return Status::InvalidArgument(std::string("memory_data_param.") + f.name +
                                     " must be given and positive");
    }
    *f.out = static_cast<int>(f.value);
  }
  const int64_t count =
      static_cast<int64_t>(batch_size_) * channels_ * static_cast<int64_t>(height_) * width_;
  if (count > context_.max_blob_values) {
    return Status::InvalidArgument("memory_data_param gives a batch of " + std::to_string(count) +
                                   " values, more than the limit of " +
                                   std::to_string(context_.max_blob_values));
  }
  top[0]->Reshape({batch_size_, channels_, height_, width_});
  top[1]->Reshape({batch_size_});
  if (from_files) {
    if (context_.world_size < 1 || context_.rank < 0 || context_.rank >= context_.world_size) {
      return Status::InvalidArgument("bad worker rank " + std::to_string(context_.rank) + " of " +
                                     std::to_string(context_.world_size));
    }
    if (context_.start_iter < 0) return Status::InvalidArgument("start_iter must be >= 0");
    PSTRAIN_RETURN_IF_ERROR(OpenFiles(*files));
  }
  return Status::Ok();
}

Status MemoryDataLayer::OpenFiles(const MemoryDataFiles& files) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<NpyFile> data, NpyFile::Open(files.data));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<NpyFile> labels, NpyFile::Open(files.labels));
  const std::vector<int64_t>& shape = data->shape();
  const std::string wanted = "(N, " + std::to_string(channels_) + ", " + std::to_string(height_) +
                             ", " + std::to_string(width_) + ")";
  if (shape.size() != 4 || shape[1] != channels_ || shape[2] != height_ || shape[3] != width_) {
    return Status::InvalidArgument(files.data + ": shape " + data->ShapeString() +
                                   " does not fit memory_data_param's " + wanted);
  }
  const int64_t n = shape[0];
  if (n < batch_size_) {
    return Status::InvalidArgument(files.data + ": " + std::to_string(n) + " sample" +
                                   (n == 1 ? "" : "s") + ", fewer than one batch of " +
                                   std::to_string(batch_size_));
  }
  const std::vector<int64_t>& label_shape = labels->shape();
  bool rows_of_one = label_shape[0] == n;
  for (size_t i = 1; i < label_shape.size(); ++i) rows_of_one = rows_of_one && label_shape[i] == 1;
  if (!rows_of_one) {
    return Status::InvalidArgument(files.labels + ": shape " + labels->ShapeString() +
                                   " is not one label for each of the " + std::to_string(n) +
                                   " samples of " + files.data + " (" + std::to_string(n) + ",)");
  }
  data_file_ = std::move(data);
  labels_file_ = std::move(labels);
  n_ = n;
  next_step_ = context_.start_iter;
  delivered_first_ = -1;
  runtime_status_ = Status::Ok();
  return Status::Ok();
}

void MemoryDataLayer::ReadFromFiles(int64_t first, float* data, float* labels) const {
  const int64_t sample_size = static_cast<int64_t>(channels_) * height_ * width_;
  int64_t done = 0;
  while (done < batch_size_) {  // at most two runs: up to the end of the file, then from row 0
    const int64_t row = (first + done) % n_;
    const int64_t run = std::min<int64_t>(batch_size_ - done, n_ - row);
    data_file_->ReadFloats(row * sample_size, run * sample_size, data + done * sample_size);
    labels_file_->ReadFloats(row, run, labels + done);
    done += run;
  }
}

Status MemoryDataLayer::Reshape(const BlobVec& /*bottom*/, const BlobVec& top) {
  top[0]->Reshape({batch_size_, channels_, height_, width_});
  top[1]->Reshape({batch_size_});
  return Status::Ok();
}

Status MemoryDataLayer::Reset(const float* data, const float* labels, int64_t n) {
  if (data_file_ != nullptr) {
    return Status::FailedPrecondition("MemoryData '" + name() + "' reads " + data_file_->path() +
                                      " (--memory-data); it takes no arrays");
  }
  if (n <= 0 || n % batch_size_ != 0) {
    return Status::InvalidArgument(
        "MemoryData '" + name() + "' takes a multiple of its batch_size " +
        std::to_string(batch_size_) + " samples, got " + std::to_string(n));
  }
  data_ = data;
  labels_ = labels;
  n_ = n;
  next_step_ = 0;
  runtime_status_ = Status::Ok();
  return Status::Ok();
}

void MemoryDataLayer::ForwardReference(const BlobVec& /*bottom*/, const BlobVec& top) {
  if (data_file_ != nullptr) {
    const int64_t first = (next_step_ * context_.world_size + context_.rank) * batch_size_;
    ReadFromFiles(first, top[0]->mutable_cpu_data(), top[1]->mutable_cpu_data());
    delivered_first_ = first;
    ++next_step_;
    return;
  }
  if (data_ == nullptr) {
    if (runtime_status_.ok()) {
      runtime_status_ = Status::FailedPrecondition(
          "MemoryData has no arrays: call set_input_arrays(data, labels) before forward");
    }
    return;
  }
  const int64_t world = std::max(1, context_.world_size);
  const int64_t first = ((next_step_ * world + context_.rank) * batch_size_) % n_;
  const int64_t sample_size = static_cast<int64_t>(channels_) * height_ * width_;
  std::copy(data_ + first * sample_size, data_ + (first + batch_size_) * sample_size,
            top[0]->mutable_cpu_data());
  std::copy(labels_ + first, labels_ + first + batch_size_, top[1]->mutable_cpu_data());
  delivered_first_ = (next_step_ * world + context_.rank) * batch_size_;
  ++next_step_;
}

Result<std::vector<MemoryDataFiles>> ParseMemoryDataFlags(const std::vector<std::string>& values) {
  std::vector<MemoryDataFiles> files;
  for (const std::string& value : values) {
    const size_t equals = value.find('=');
    const size_t comma = equals == std::string::npos ? equals : value.find(',', equals);
    if (equals == 0 || comma == std::string::npos || comma == equals + 1 ||
        comma + 1 == value.size() || value.find(',', comma + 1) != std::string::npos) {
      return Status::InvalidArgument("--memory-data '" + value +
                                     "': expected LAYER=DATA.npy,LABELS.npy");
    }
    const std::string layer = value.substr(0, equals);
    for (const MemoryDataFiles& f : files) {
      if (f.layer == layer) {
        return Status::InvalidArgument("--memory-data names layer '" + layer + "' twice");
      }
    }
    files.push_back(MemoryDataFiles{layer, value.substr(equals + 1, comma - equals - 1),
                                    value.substr(comma + 1)});
  }
  return files;
}

PSTRAIN_REGISTER_LAYER("MemoryData", MemoryDataLayer);

}  // namespace pstrain

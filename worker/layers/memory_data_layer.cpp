#include "worker/layers/memory_data_layer.hpp"

#include <algorithm>
#include <string>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status MemoryDataLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& top) {
  if (!context_.memory_data_from_caller) {
    return Status::InvalidArgument(
        "MemoryData takes its samples from arrays handed over in Python (pstrain.caffe's "
        "Net.set_input_arrays); ps-net and ps-train jobs have none to give it (use a Data layer "
        "over an LMDB, or pstrain.caffe)");
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
  return Status::Ok();
}

Status MemoryDataLayer::Reshape(const BlobVec& /*bottom*/, const BlobVec& top) {
  top[0]->Reshape({batch_size_, channels_, height_, width_});
  top[1]->Reshape({batch_size_});
  return Status::Ok();
}

Status MemoryDataLayer::Reset(const float* data, const float* labels, int64_t n) {
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

PSTRAIN_REGISTER_LAYER("MemoryData", MemoryDataLayer);

}  // namespace pstrain

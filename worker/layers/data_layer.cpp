#include "worker/layers/data_layer.hpp"

#include <cstring>
#include <functional>

#include "worker/layer_registry.hpp"

namespace pstrain {

DataLayer::~DataLayer() { StopPrefetch(); }

Status DataLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& /*top*/) {
  StopPrefetch();
  const caffe::DataParameter& p = param_.data_param();
  if (p.source().empty()) return Status::Error("data_param.source must be given");
  if (p.batch_size() == 0) return Status::Error("data_param.batch_size must be positive");
  if (p.batch_size() > static_cast<uint32_t>(INT32_MAX)) {
    return Status::Error("data_param.batch_size is too large");
  }
  if (p.rand_skip() != 0) {
    return Status::Error(
        "data_param.rand_skip is not supported (sharding fixes the records "
        "each worker reads)");
  }
  caffe::TransformationParameter transform = param_.transform_param();
  if (p.has_scale() && !transform.has_scale()) transform.set_scale(p.scale());
  if (p.has_mean_file() && !transform.has_mean_file()) transform.set_mean_file(p.mean_file());
  if (p.has_crop_size() && !transform.has_crop_size()) transform.set_crop_size(p.crop_size());
  if (p.has_mirror() && !transform.has_mirror()) transform.set_mirror(p.mirror());

  ShardSpec shard;
  shard.rank = context().rank;
  shard.world_size = context().world_size;
  shard.batch_size = static_cast<int>(p.batch_size());
  shard.seed = MixSeed(context().seed, std::hash<std::string>{}(name()));
  if (shard.world_size < 1 || shard.rank < 0 || shard.rank >= shard.world_size) {
    return Status::Error("bad worker rank " + std::to_string(shard.rank) + " of " +
                         std::to_string(shard.world_size));
  }
  if (context().start_iter < 0) return Status::Error("start_iter must be >= 0");
  PSTRAIN_ASSIGN_OR_RETURN(reader_,
                           ShardedBatchReader::Open(p.source(), transform, phase(), shard,
                                                    BackendOf(p)));
  data_shape_ = reader_->data_shape();
  depth_ = std::max<size_t>(1, p.prefetch());
  status_ = Status::Ok();
  StartPrefetch(context().start_iter);
  return Status::Ok();
}

Status DataLayer::Reshape(const BlobVec& /*bottom*/, const BlobVec& top) {
  top[0]->Reshape(data_shape_);
  if (top.size() > 1) top[1]->Reshape({data_shape_[0]});
  return Status::Ok();
}

int64_t DataLayer::record_count() const { return reader_ ? reader_->record_count() : 0; }

void DataLayer::SeekToBatch(int64_t t) {
  StopPrefetch();
  StartPrefetch(t);
}

void DataLayer::StartPrefetch(int64_t first_batch) {
  next_batch_ = first_batch;
  stop_ = false;
  producer_done_ = false;
  thread_ = std::thread(&DataLayer::PrefetchLoop, this, first_batch);
}

void DataLayer::StopPrefetch() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
  while (!full_.empty()) {
    free_.push_back(std::move(full_.front()));
    full_.pop_front();
  }
}

void DataLayer::PrefetchLoop(int64_t first_batch) {
  const size_t data_count = static_cast<size_t>(int64_t{data_shape_[0]} * data_shape_[1] *
                                                data_shape_[2] * data_shape_[3]);
  for (int64_t t = first_batch;; ++t) {
    std::unique_ptr<Batch> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || full_.size() < depth_; });
      if (stop_) return;
      if (!free_.empty()) {
        batch = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (!batch) batch = std::make_unique<Batch>();
    batch->index = t;
    batch->first_sample = reader_->FirstSample(t);
    batch->data.resize(data_count);
    batch->label.resize(static_cast<size_t>(data_shape_[0]));
    batch->status = reader_->Read(t, batch->data.data(), batch->label.data());
    const bool failed = !batch->status.ok();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      full_.push_back(std::move(batch));
      producer_done_ = failed;
    }
    changed_.notify_all();
    if (failed) return;
  }
}

void DataLayer::ForwardReference(const BlobVec& /*bottom*/, const BlobVec& top) {
  if (!status_.ok() || !thread_.joinable()) return;
  std::unique_ptr<Batch> batch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !full_.empty() || producer_done_; });
    if (full_.empty()) return;
    batch = std::move(full_.front());
    full_.pop_front();
  }
  changed_.notify_all();
  if (batch->status.ok()) {
    PSTRAIN_CHECK(batch->index == next_batch_);
    top[0]->Reshape(data_shape_);
    std::memcpy(top[0]->mutable_cpu_data(), batch->data.data(), batch->data.size() * sizeof(float));
    if (top.size() > 1) {
      top[1]->Reshape({data_shape_[0]});
      std::memcpy(top[1]->mutable_cpu_data(), batch->label.data(),
                  batch->label.size() * sizeof(float));
    }
    delivered_first_ = batch->first_sample;
    ++next_batch_;
  } else {
    status_ = batch->status;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(std::move(batch));
}

PSTRAIN_REGISTER_LAYER("Data", DataLayer);

}  // namespace pstrain

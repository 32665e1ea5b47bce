// Data layer ("Data"): batches of Caffe Datums from an LMDB, transformed by
// transform_param, read ahead by a prefetch thread, sharded across workers.
//
// data_param: source (an LMDB or LevelDB folder, relative paths from the
// current directory, as Caffe), batch_size, backend (LMDB or LEVELDB; unset
// means LMDB), prefetch (queue depth, default 4). The deprecated data_param
// scale / mean_file / crop_size / mirror are used when transform_param leaves
// them unset. Tops: data (B x C x H' x W') and optionally label (B).
//
// Sharding and determinism: see ShardedBatchReader. The first Forward
// delivers global step context().start_iter; each Forward the next step, and
// reports the stream position of the batch's first sample
// (DeliveredFirstSample), which Net hands to the layers after this one.
//
// Bad records: a record met by the prefetch thread that cannot be read or
// parsed stops the stream. The Forward that would deliver that batch leaves
// the tops holding the previous batch and sets status() to the error (which
// names the LMDB and the record); the caller (trainer) checks status() after
// every forward and stops. Later Forwards change nothing. Errors found at
// setup (missing or empty LMDB, bad first record) are returned by SetUp.
//
// Threads: the prefetch thread is owned by the layer and joined by Rewind,
// SeekToBatch, and the destructor. All public methods are called from the one
// thread that drives the layer.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "worker/data/batch_reader.hpp"
#include "worker/layer.hpp"

namespace pstrain {

class DataLayer : public Layer {
 public:
  explicit DataLayer(const caffe::LayerParameter& param) : Layer(param) {}
  ~DataLayer() override;

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Data"; }
  bool IsDataSource() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

  // Ok, or the first bad-record error the stream met (sticky).
  Status status() const { return status_; }
  Status RuntimeStatus() const override { return status_; }
  // The next Forward delivers global step 0 (the start of the data set for
  // rank 0 of 1): used between test passes.
  void Rewind() { SeekToBatch(0); }
  // The next Forward delivers global step t. REQUIRES: t >= 0, after SetUp.
  void SeekToBatch(int64_t t) override;
  // Global step the next Forward delivers.
  int64_t next_batch() const { return next_batch_; }
  int64_t record_count() const;
  // Stream position of the first sample of the batch the last successful
  // Forward delivered; -1 before the first.
  int64_t DeliveredFirstSample() const override { return delivered_first_; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}

 private:
  struct Batch {
    int64_t index = 0;
    int64_t first_sample = 0;  // stream position of sample 0
    std::vector<float> data;
    std::vector<float> label;
    Status status;
  };

  void StartPrefetch(int64_t first_batch);
  void StopPrefetch();
  void PrefetchLoop(int64_t first_batch);

  std::unique_ptr<ShardedBatchReader> reader_;  // used by the prefetch thread only while it runs
  std::vector<int> data_shape_;
  size_t depth_ = 4;
  int64_t next_batch_ = 0;
  int64_t delivered_first_ = -1;
  Status status_;

  std::thread thread_;
  std::mutex mutex_;  // guards full_, free_, stop_, producer_done_
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Batch>> full_;
  std::vector<std::unique_ptr<Batch>> free_;
  bool stop_ = false;
  bool producer_done_ = false;  // the thread met an error and produces no more
};

}  // namespace pstrain

// MemoryData layer ("MemoryData"): batches from arrays the caller hands over
// (Caffe's MemoryDataLayer, fed by pycaffe's Net.set_input_arrays).
//
// memory_data_param: batch_size, channels, height, width (all required, > 0).
// Tops: data (batch_size, channels, height, width) and label (batch_size).
// Reset(data, labels, n) points the layer at n samples, n a multiple of
// batch_size; each Forward copies the next batch, in turn, wrapping at n.
// With several workers (NetContext rank of world_size) global step t reads
// samples [(t*W + w)*B, (t*W + w + 1)*B) modulo n, the sharding the Data layer
// uses, so bsp with W workers of batch B sees what one worker of batch W*B
// sees. transform_param is not applied (Caffe applies it only to Datum and
// cv::Mat inputs, never to arrays given to Reset). No gradient.
//
// Fed from arrays: only a caller that can hand them over may build one
// (NetContext::memory_data_from_caller). A Forward before Reset is a
// RuntimeStatus error.
//
// Fed from .npy files (NetContext::memory_data_files names the layer: ps-net's
// and ps-worker's --memory-data LAYER=DATA.npy,LABELS.npy): set-up maps both
// files read-only (worker/data/npy_file.hpp), so the workers of one machine
// share one copy in the page cache. DATA is N x channels x height x width of
// any dtype NpyFile reads, LABELS N values (shape (N,) or N followed by ones);
// both are converted to float32 per batch. N need not be a multiple of
// batch_size but must be at least one batch: sample position p of the stream
// is row p mod N, so global step t of worker w of W reads rows
// [(t*W + w)*B, (t*W + w + 1)*B) mod N, starting at the net's start_iter.
// A file that is missing, does not parse, is in Fortran order, has a shape
// that does not fit, or holds fewer than batch_size samples fails set-up with
// one error naming the file.
//
// With neither, set-up fails naming the layer and the flag.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/data/npy_file.hpp"
#include "worker/layer.hpp"

namespace pstrain {

class MemoryDataLayer : public Layer {
 public:
  explicit MemoryDataLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "MemoryData"; }
  bool IsDataSource() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 2; }
  Status RuntimeStatus() const override { return runtime_status_; }
  int64_t DeliveredFirstSample() const override { return delivered_first_; }
  void SeekToBatch(int64_t t) override { next_step_ = t; }

  // Points the layer at `n` samples of channels*height*width values each and
  // `n` labels, read (not copied) at each Forward; the next Forward delivers
  // step 0. REQUIRES: the arrays stay alive and unmoved until the next Reset
  // or the layer's end. Fails when n is not a positive multiple of batch_size.
  Status Reset(const float* data, const float* labels, int64_t n);
  int batch_size() const { return batch_size_; }
  int channels() const { return channels_; }
  int height() const { return height_; }
  int width() const { return width_; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}

 private:
  Status OpenFiles(const MemoryDataFiles& files);
  void ReadFromFiles(int64_t first, float* data, float* labels) const;

  int batch_size_ = 0;
  int channels_ = 0;
  int height_ = 0;
  int width_ = 0;
  const float* data_ = nullptr;
  const float* labels_ = nullptr;
  int64_t n_ = 0;
  int64_t next_step_ = 0;
  int64_t delivered_first_ = -1;
  Status runtime_status_;
  std::unique_ptr<NpyFile> data_file_;  // both set: fed from .npy files
  std::unique_ptr<NpyFile> labels_file_;
};

// Parses the values of --memory-data, each "LAYER=DATA.npy,LABELS.npy" (the
// paths hold no comma), into NetContext::memory_data_files. Errors:
// "--memory-data 'v': expected LAYER=DATA.npy,LABELS.npy" and
// "--memory-data names layer 'x' twice".
Result<std::vector<MemoryDataFiles>> ParseMemoryDataFlags(const std::vector<std::string>& values);

}  // namespace pstrain

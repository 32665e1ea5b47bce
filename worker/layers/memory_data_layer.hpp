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
// Only a caller that can hand over arrays may build one
// (NetContext::memory_data_from_caller); elsewhere set-up fails naming the
// layer. A Forward before Reset is a RuntimeStatus error.
#pragma once

#include <cstdint>
#include <vector>

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
};

}  // namespace pstrain

// HDF5Output (Caffe's HDF5OutputLayer): writes its two bottoms to an HDF5 file.
//
// hdf5_output_param.file_name: the file, created (truncated) at set-up.
// Bottoms: data and label, with the same first axis (num); no tops, no
// gradient. Each Forward appends bottom 0's samples to the dataset "data" and
// bottom 1's to "label", float32, each sample as Caffe's 4-D legacy shape
// (num, channels, height, width: a (N, 10) bottom is written N x 10 x 1 x 1;
// a bottom of more than 4 axes is refused), and flushes the file, so the file
// holds every batch so far. (Caffe's own layer writes each batch as new
// datasets of those names, which HDF5 refuses from the second batch on; this
// one appends.) The file is closed when the layer goes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class Hdf5AppendWriter;

class Hdf5OutputLayer : public Layer {
 public:
  explicit Hdf5OutputLayer(const caffe::LayerParameter& param);
  ~Hdf5OutputLayer() override;

  const char* type() const override { return "HDF5Output"; }
  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 0; }
  bool AllowForceBackward(int) const override { return false; }
  Status RuntimeStatus() const override { return status_; }
  // Samples written so far.
  int64_t rows_written() const { return rows_; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}

 private:
  std::unique_ptr<Hdf5AppendWriter> writer_;
  int64_t rows_ = 0;
  Status status_;
};

}  // namespace pstrain

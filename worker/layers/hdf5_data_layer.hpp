// HDF5Data (Caffe's HDF5DataLayer): batches of rows from HDF5 files.
//
// hdf5_data_param: source, a text file listing .h5 files (whitespace-separated
// names, used as given: relative ones from the current directory, as Caffe);
// batch_size; shuffle. Top i is read from the dataset named as the top (Caffe
// reads the top names as dataset names), whole, as float32 (float, double and
// integer datasets; HDF5 converts); a dataset's first axis is its rows, and
// top i is (batch_size, that dataset's other axes). Every dataset of a file
// has the same number of rows, and every file the first file's row shapes:
// all files are checked at set-up, each problem named by file and dataset.
// transform_param is refused (Caffe: "does not transform data").
//
// The stream: the files in listed order, each file's rows in order, wrapping
// around after the last row of the last file (Caffe's order). With shuffle the
// file order is shuffled at every pass over the data and the rows of each file
// each time it is loaded, as Caffe does, but seeded (by the net's seed, the
// layer name and the pass), so the order is the same in every worker and
// every run. Sharding as the Data layer: worker w of W with batch B reads, at
// global step t, stream positions [(t*W + w)*B, (t*W + w + 1)*B) (Caffe's
// multi-GPU solvers deal out single rows instead). One file is held in memory
// at a time, as in Caffe; no prefetch thread.
//
// A file that changes after set-up and no longer reads is a run-time error
// (RuntimeStatus, sticky, naming file and dataset): that batch is not
// delivered and later Forwards change nothing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/layers/stream_data_layer.hpp"

namespace pstrain {

class Hdf5DataLayer : public StreamDataLayer {
 public:
  using StreamDataLayer::StreamDataLayer;

  const char* type() const override { return "HDF5Data"; }
  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int MinTopBlobs() const override { return 1; }
  // Rows in all files together.
  int64_t row_count() const { return total_rows_; }
  const std::vector<std::string>& files() const { return files_; }

 private:
  Status ReadBatch(int64_t t, const BlobVec& top) override;
  // Makes `file` the loaded one, its rows ordered for pass `epoch`.
  Status Load(int64_t epoch, int file);
  void OrderFiles(int64_t epoch);

  std::vector<std::string> files_;
  std::vector<int64_t> rows_;                // per file
  std::vector<std::vector<int>> row_shape_;  // per top
  std::vector<int64_t> row_size_;            // per top: values in one row
  int64_t total_rows_ = 0;
  int batch_size_ = 0;
  bool shuffle_ = false;
  uint64_t seed_ = 0;

  int64_t ordered_epoch_ = -1;
  std::vector<int64_t> file_order_;  // files of the pass ordered_epoch_
  std::vector<int64_t> file_start_;  // stream offset of each, in that order
  int64_t loaded_epoch_ = -1;
  int loaded_file_ = -1;
  std::vector<std::vector<float>> loaded_;  // per top: the loaded file's dataset
  std::vector<int64_t> row_order_;          // the loaded file's rows, in stream order

};

}  // namespace pstrain

// HDF5 files as Caffe's HDF5Data and HDF5Output layers use them: whole
// datasets read as float32 (HDF5 converts float, double and integer data),
// and datasets written as float32 and grown along their first axis.
//
// libhdf5's C API (Debian's libhdf5-dev, the serial build): it is not
// thread-safe, so one thread at a time may use these in a process. Its own
// error printing is switched off; every error is a Status naming the file and
// the dataset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace pstrain {

class Hdf5Reader {
 public:
  // Errors: "<path>: no such file" (NotFound), "<path>: not an HDF5 file"
  // (Corruption), "<path>: cannot open HDF5 file" (IOError).
  static Result<std::unique_ptr<Hdf5Reader>> Open(const std::string& path);
  ~Hdf5Reader();
  Hdf5Reader(const Hdf5Reader&) = delete;
  Hdf5Reader& operator=(const Hdf5Reader&) = delete;

  const std::string& path() const { return path_; }
  // The dataset's dimensions. Errors: "<path>: dataset 'x' not found",
  // "<path>: dataset 'x' holds <class> values; HDF5Data reads float, double
  // and integer datasets", "<path>: dataset 'x' is a scalar; it needs an axis
  // of rows", "<path>: dataset 'x' has N axes, more than 32", a dimension over
  // INT_MAX.
  Result<std::vector<int>> Shape(const std::string& dataset) const;
  // Reads the whole dataset as float32, row-major. `values` is resized.
  Status Read(const std::string& dataset, std::vector<float>* values) const;

  // Whether `path` ("a/b/c"; "/": the root group) names a group or dataset
  // (false when any part of it is missing).
  bool Exists(const std::string& path) const;
  // The names of the links in `group`, in name order (libhdf5's name index,
  // the order Caffe's HDF5 snapshot readers visit them). Errors: "<path>:
  // group 'x' not found", "<path>: 'x' is not a group".
  Result<std::vector<std::string>> Links(const std::string& group) const;
  // One integer: a scalar dataset or one of a single value (Caffe's
  // hdf5_save_int writes shape (1)). Errors: "<path>: dataset 'x' not found",
  // "<path>: dataset 'x' holds <class> values, not integers", "<path>: dataset
  // 'x' holds N values, not one integer".
  Result<int64_t> ReadInt(const std::string& dataset) const;
  // A scalar string dataset, fixed-length (Caffe's hdf5_save_string) or
  // variable-length (h5py's default). Errors: "<path>: dataset 'x' not
  // found", "<path>: dataset 'x' holds <class> values, not a string".
  Result<std::string> ReadString(const std::string& dataset) const;

 private:
  explicit Hdf5Reader(std::string path) : path_(std::move(path)) {}
  std::string path_;
  int64_t file_ = -1;  // hid_t
};

// Creates (truncates) `path` and appends rows to float32 datasets, each with
// an unlimited first axis. One writer per file.
class Hdf5AppendWriter {
 public:
  // Errors: "<path>: cannot create HDF5 file" (IOError).
  static Result<std::unique_ptr<Hdf5AppendWriter>> Create(const std::string& path);
  ~Hdf5AppendWriter();
  Hdf5AppendWriter(const Hdf5AppendWriter&) = delete;
  Hdf5AppendWriter& operator=(const Hdf5AppendWriter&) = delete;

  // Appends shape[0] rows (values: product(shape) floats) to `dataset`,
  // creating it at the first call; later calls must give the same shape after
  // the first axis ("<path>: dataset 'x' has rows of 3 x 1 x 1, got 4 x 1 x 1")
  // and the file is flushed after each call.
  Status Append(const std::string& dataset, const std::vector<int>& shape, const float* values);
  // Rows written to `dataset` so far (0 before the first Append).
  int64_t rows(const std::string& dataset) const;

 private:
  explicit Hdf5AppendWriter(std::string path) : path_(std::move(path)) {}
  struct Dataset {
    std::string name;
    int64_t id = -1;  // hid_t
    std::vector<int> row_shape;
    int64_t rows = 0;
  };
  std::string path_;
  int64_t file_ = -1;  // hid_t
  std::vector<Dataset> datasets_;
};

// Builds a whole HDF5 file in memory (libhdf5's core driver, no backing
// store) and hands back its bytes, so that the caller writes them with
// WriteFileAtomically: a snapshot is either all there or not there. The
// datasets are made as libhdf5's H5LT functions make them (Caffe's
// hdf5_save_nd_dataset, hdf5_save_int and hdf5_save_string): float32 of the
// given shape, a 32-bit integer of shape (1), a null-terminated fixed-length
// scalar string.
class Hdf5ImageWriter {
 public:
  // `name` is for messages only. Errors: "<name>: cannot create HDF5 file".
  static Result<std::unique_ptr<Hdf5ImageWriter>> Create(const std::string& name);
  ~Hdf5ImageWriter();
  Hdf5ImageWriter(const Hdf5ImageWriter&) = delete;
  Hdf5ImageWriter& operator=(const Hdf5ImageWriter&) = delete;

  // Each name is a path ("data/conv1/0"); its groups must exist. Errors:
  // "<name>: cannot create group 'x'", "<name>: cannot write dataset 'x'".
  Status AddGroup(const std::string& group);
  Status AddFloats(const std::string& dataset, const std::vector<int>& shape,
                   const float* values);
  Status AddInt(const std::string& dataset, int value);
  Status AddString(const std::string& dataset, const std::string& value);
  // The file's bytes as they would be on disk.
  Result<std::string> Image();

 private:
  explicit Hdf5ImageWriter(std::string name) : name_(std::move(name)) {}
  Status Written(int64_t id, const std::string& what, const std::string& dataset);
  // Creates `dataset` of HDF5 type `type` over dataspace `space` (hid_t
  // values; either negative: a failure before) and writes `values` into it.
  Status AddDataset(const std::string& dataset, int64_t type, int64_t space, const void* values);
  std::string name_;
  int64_t file_ = -1;  // hid_t
};

}  // namespace pstrain

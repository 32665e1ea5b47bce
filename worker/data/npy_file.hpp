// NumPy .npy files (numpy.save's format, versions 1.0, 2.0 and 3.0) mapped
// read-only: the header is parsed, the file is mmap'ed (MAP_SHARED, so
// processes reading the same file share its pages in the page cache) and
// values are converted to float32 as they are read.
//
// Accepted: C order ('fortran_order': False), little-endian or one-byte
// dtypes '<f4' '<f8' '<i1' '<i2' '<i4' '<i8' '<u1' '<u2' '<u4' '<u8' ('|' for
// the one-byte ones, '=' as '<'), at least one axis. Every error is a Status
// whose message starts with "<path>: " and says what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace pstrain {

class NpyFile {
 public:
  // Errors: "<path>: no such file" (NotFound), "<path>: cannot read: <why>"
  // (IOError), "<path>: not a .npy file (...)" and the header's faults
  // (Corruption), a dtype or order it does not read (InvalidArgument).
  static Result<std::unique_ptr<NpyFile>> Open(const std::string& path);
  ~NpyFile();
  NpyFile(const NpyFile&) = delete;
  NpyFile& operator=(const NpyFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::string& descr() const { return descr_; }
  // "(3, 1, 2)": the shape as numpy prints it.
  std::string ShapeString() const;
  // Values in the file: the product of shape().
  int64_t count() const { return count_; }

  // Converts values [first, first + n) (C order) to float32 into `out`.
  // REQUIRES: 0 <= first and first + n <= count().
  void ReadFloats(int64_t first, int64_t n, float* out) const;

 private:
  enum class Kind { kFloat, kSigned, kUnsigned };
  explicit NpyFile(std::string path) : path_(std::move(path)) {}
  Status ParseHeader(size_t file_size);

  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const unsigned char* values_ = nullptr;
  std::string descr_;
  Kind kind_ = Kind::kFloat;
  int item_size_ = 4;
  std::vector<int64_t> shape_;
  int64_t count_ = 0;
};

}  // namespace pstrain

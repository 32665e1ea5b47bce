// Test support for the data suites: temporary folders under /tmp, and
// writers of small real IDX files, Datums and LMDBs (including corrupt ones).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "proto/caffe.pb.h"
#include "worker/data/image_codec.hpp"

namespace pstrain::testing {

// A fresh folder under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes `bytes` to `path`, gzipped when gz is true.
void WriteFile(const std::string& path, const std::string& bytes, bool gz);
// Writes `image` to `path` as a PNG (worker/data/image_codec.hpp's encoder).
void WritePng(const std::string& path, const Image& image);
// IDX headers and payloads: images (magic 0x803, n, rows, cols) and labels (0x801, n).
std::string IdxImages(int n, int rows, int cols, const std::string& pixels);
std::string IdxLabels(const std::string& labels);

caffe::Datum MakeDatum(int channels, int height, int width, const std::string& bytes, int label);
// A 1 x h x w datum whose pixels are all `value`, labelled `label`.
std::string UniformDatum(int height, int width, uint8_t value, int label);

// Writes an LMDB at `dir` (created) holding these records.
void WriteLmdb(const std::string& dir,
               const std::vector<std::pair<std::string, std::string>>& records);
// An LMDB of n 1 x h x w records: record i has key "%08d" of i, every pixel
// i % 256 and label i.
void WriteCountingLmdb(const std::string& dir, int n, int height, int width);
// An LMDB of n 1 x 2 x 2 records with distinct pixels ((37 i + 61 k) % 256 for
// pixel k of record i) and labels i % 3: the trainer tests' training data.
void WriteMixedLmdb(const std::string& dir, int n);

}  // namespace pstrain::testing

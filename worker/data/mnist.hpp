// MNIST-format (IDX) files and their conversion to a database of Caffe Datums.
//
// IDX files may be gzipped or plain (zlib reads both). Image files have magic
// 0x00000803 and dimensions N, rows, cols; label files magic 0x00000801 and N.
// The LMDB written is the one Caffe's convert_mnist_data writes: keys "%08d"
// (record index), values Datum{channels 1, height rows, width cols, data = the
// raw pixel bytes, label}. The pair database is the one Caffe's
// convert_mnist_siamese_data writes for its siamese example.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "worker/data/record_reader.hpp"

namespace pstrain {

struct MnistConversion {
  int64_t records = 0;
  int rows = 0;
  int cols = 0;
};

// Reads every label of an IDX label file. Errors name the file: cannot open,
// bad magic number, truncated, extra data after the labels.
Result<std::vector<uint8_t>> ReadMnistLabels(const std::string& path);

// Converts `images` and `labels` into a new LMDB at `out`. The LMDB is built
// in a temporary folder next to `out` and renamed into place when complete,
// so a crash never leaves a partial LMDB under the name `out`. Missing parent
// folders are created. Refuses when `out` exists ("<out>: already exists ...").
// Errors name the file: bad magic numbers, image and label counts that
// differ, truncated files, extra data, LMDB write failures.
Result<MnistConversion> ConvertMnistToLmdb(const std::string& images, const std::string& labels,
                                           const std::string& out);

// Caffe's convert_mnist_siamese_data: as many pair records as there are
// images. Record k (key "%08d" of k) pairs images i and j, each drawn
// uniformly from [0, N) by std::mt19937_64 seeded with `seed` (i = draw % N,
// then j = draw % N, as Caffe draws them): Datum{channels 2 (image i, then
// image j), height rows, width cols, label 1 when their labels are equal, else
// 0}. Written to a new database at `out` of `backend`, all or nothing (as
// BuildRecordDb). Errors as ConvertMnistToLmdb's.
Result<MnistConversion> ConvertMnistPairs(const std::string& images, const std::string& labels,
                                          const std::string& out, DbBackend backend, uint64_t seed);

}  // namespace pstrain

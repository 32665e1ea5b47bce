// ps-data images and ps-data mean: Caffe's convert_imageset and
// compute_image_mean.
//
// ConvertImageSet reads a list file of lines "relative/path label" (the label
// is the last space-separated field, so paths may hold spaces; blank lines are
// skipped), reads each image under `root`, and writes an LMDB of Datums with
// keys "%08d_<path>" (the record's position, then its path, as
// convert_imageset), or with backend "leveldb" a LevelDB of the same records. A record is raw (C x
// H x W bytes, B, G, R planar) or, with `encoded`, the PNG/JPEG bytes with Datum.encoded set: the
// image file itself when nothing changes it, else the image re-encoded as `encode_type` (default:
// the file's own format). The LMDB is written all or nothing (lmdb_writer.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace pstrain {

// One line of an image list: "relative/path label".
struct ListEntry {
  std::string path;
  int label = 0;
  int line = 0;  // 1-based line in the list file
};

// Reads a list file of lines "relative/path label" (the label is the last
// space- or tab-separated field, so paths may hold spaces; blank lines are
// skipped), as convert_imageset and Caffe's ImageData layer read it. Errors:
// "<list>: cannot open (...)", "<list>: holds no images", "<list>:<line>:
// expected 'PATH LABEL' ...", "<list>:<line>: label 'x' is not an integer".
Result<std::vector<ListEntry>> ReadImageList(const std::string& list_file);

struct ImageSetOptions {
  std::string list_file;
  std::string root;  // prefixed to each listed path ("" = as listed)
  std::string out;
  int resize_height = 0;  // both 0, or both > 0: resize every image (bilinear)
  int resize_width = 0;
  bool gray = false;     // 1 channel; else every image has 3 (B, G, R)
  bool shuffle = false;  // shuffle the lines (seeded by `seed`) before writing
  uint64_t seed = 0;
  bool encoded = false;          // store PNG/JPEG bytes instead of raw pixels
  std::string encode_type;       // "", "png" or "jpg"
  bool check_size = false;       // refuse images whose size differs from the first's
  std::string backend = "lmdb";  // or "leveldb" (Caffe's convert_imageset -backend)
};

struct ImageSetConversion {
  int64_t records = 0;
  int channels = 0;  // of the first image as stored (after gray / resize)
  int height = 0;
  int width = 0;
  bool same_size = true;  // every image had the first one's size
};

// Errors, each naming the place: bad options ("--resize_height and
// --resize_width go together", "--encode_type jpeg2k: expected png or jpg",
// "--backend x: expected lmdb or leveldb"), "<list>: cannot open",
// "<list>: holds no images", "<list>:<line>: expected 'PATH LABEL' ...",
// "<list>:<line>: label 'x' is not an integer", "<list>:<line>: <file>: cannot
// read (...)" or "...: <DecodeImage's error>", "<list>:<line>: <file>: size
// H x W differs from the first image's ..." (with check_size), an existing
// output, LMDB write errors. Nothing is left at `out` on error.
Result<ImageSetConversion> ConvertImageSet(const ImageSetOptions& options);

struct ImageMean {
  int64_t records = 0;
  int channels = 0;
  int height = 0;
  int width = 0;
  std::vector<double> channel_means;  // the mean of each channel's plane
};

// Averages every record of the LMDB at `lmdb` (encoded records decoded with
// their own channel count) and writes the mean as a binary BlobProto with
// num 1, channels, height, width (Caffe's mean-file format, read by
// transform_param.mean_file) to `out`, atomically. Errors: the LMDB's
// (cannot open, empty, a bad record named by key), a record whose shape
// differs from the first's (named by key), the write.
Result<ImageMean> ComputeImageMean(const std::string& lmdb, const std::string& out);

}  // namespace pstrain

#include "worker/data/mnist.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include "proto/caffe.pb.h"
#include "worker/data/lmdb_writer.hpp"
#include "worker/data/record_writer.hpp"

namespace pstrain {
namespace {

constexpr uint32_t kImageMagic = 0x00000803;
constexpr uint32_t kLabelMagic = 0x00000801;
constexpr int64_t kMaxImageBytes = int64_t{1} << 26;
constexpr int64_t kMaxPairImagesBytes = int64_t{1} << 32;  // ConvertMnistPairs holds them all

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// A gzipped or plain file read through zlib; every error names the file.
class GzReader {
 public:
  static Result<std::unique_ptr<GzReader>> Open(const std::string& path) {
    errno = 0;
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) {
      return Status::Error(path + ": cannot open (" +
                           (errno != 0 ? std::strerror(errno) : "out of memory") + ")");
    }
    gzbuffer(file, 1 << 20);
    return std::unique_ptr<GzReader>(new GzReader(path, file));
  }
  ~GzReader() { gzclose(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes; returns how many were read (< n only at the end).
  Result<int64_t> Read(void* buffer, int64_t n) {
    int64_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, 1 << 30));
      const int got = gzread(file_, static_cast<char*>(buffer) + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* why = gzerror(file_, &code);
        return Status::Error(path_ + ": read error (" + why + ")");
      }
      if (got == 0) break;
      done += got;
    }
    return done;
  }
  Status ReadExact(void* buffer, int64_t n, const std::string& what) {
    PSTRAIN_ASSIGN_OR_RETURN(int64_t got, Read(buffer, n));
    if (got != n) return Status::Error(path_ + ": truncated (the file ends inside " + what + ")");
    return Status::Ok();
  }
  Result<uint32_t> ReadBigEndian32(const std::string& what) {
    unsigned char b[4];
    PSTRAIN_RETURN_IF_ERROR(ReadExact(b, 4, what));
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  }
  Status ExpectEnd(const std::string& what) {
    char extra;
    PSTRAIN_ASSIGN_OR_RETURN(int64_t got, Read(&extra, 1));
    if (got != 0) return Status::Error(path_ + ": unexpected data after the " + what);
    return Status::Ok();
  }
  const std::string& path() const { return path_; }

 private:
  GzReader(std::string path, gzFile file) : path_(std::move(path)), file_(file) {}
  std::string path_;
  gzFile file_;
};

Status CheckMagic(GzReader& in, uint32_t expected, const char* kind) {
  PSTRAIN_ASSIGN_OR_RETURN(uint32_t magic, in.ReadBigEndian32("the IDX header"));
  if (magic != expected) {
    return Status::Error(in.path() + ": not an IDX " + kind + " file (magic number " + Hex(magic) +
                         ", expected " + Hex(expected) + ")");
  }
  return Status::Ok();
}

// Opens a label file and reads its header; returns the label count.
Result<std::unique_ptr<GzReader>> OpenLabels(const std::string& path, uint32_t* count) {
  PSTRAIN_ASSIGN_OR_RETURN(auto in, GzReader::Open(path));
  PSTRAIN_RETURN_IF_ERROR(CheckMagic(*in, kLabelMagic, "label"));
  PSTRAIN_ASSIGN_OR_RETURN(*count, in->ReadBigEndian32("the IDX header"));
  return in;
}

// Streams the images into `writer`.
Status WriteRecords(GzReader& images, const std::vector<uint8_t>& labels, int rows, int cols,
                    LmdbWriter& writer) {
  const int64_t image_bytes = int64_t{rows} * cols;
  const int64_t n = static_cast<int64_t>(labels.size());
  caffe::Datum datum;
  datum.set_channels(1);
  datum.set_height(rows);
  datum.set_width(cols);
  std::string pixels(static_cast<size_t>(image_bytes), '\0');
  std::string value;
  char key[32];
  for (int64_t i = 0; i < n; ++i) {
    PSTRAIN_RETURN_IF_ERROR(
        images.ReadExact(pixels.data(), image_bytes, "image " + std::to_string(i)));
    datum.set_data(pixels);
    datum.set_label(labels[static_cast<size_t>(i)]);
    datum.SerializeToString(&value);
    std::snprintf(key, sizeof(key), "%08lld", static_cast<long long>(i));
    PSTRAIN_RETURN_IF_ERROR(writer.Put(key, value));
  }
  return images.ExpectEnd(std::to_string(n) + " images");
}

// An image file after its header: the reader at the first pixel.
struct ImageFile {
  std::unique_ptr<GzReader> reader;
  uint32_t count = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
};

// Opens an image file, reads and checks its header against the label count.
Result<ImageFile> OpenImages(const std::string& images_path, const std::string& labels_path,
                             size_t label_count) {
  ImageFile f;
  PSTRAIN_ASSIGN_OR_RETURN(f.reader, GzReader::Open(images_path));
  PSTRAIN_RETURN_IF_ERROR(CheckMagic(*f.reader, kImageMagic, "image"));
  PSTRAIN_ASSIGN_OR_RETURN(f.count, f.reader->ReadBigEndian32("the IDX header"));
  PSTRAIN_ASSIGN_OR_RETURN(f.rows, f.reader->ReadBigEndian32("the IDX header"));
  PSTRAIN_ASSIGN_OR_RETURN(f.cols, f.reader->ReadBigEndian32("the IDX header"));
  if (f.rows == 0 || f.cols == 0 || int64_t{f.rows} * f.cols > kMaxImageBytes) {
    return Status::Error(images_path + ": bad image size " + std::to_string(f.rows) + " x " +
                         std::to_string(f.cols));
  }
  if (f.count != label_count) {
    return Status::Error(images_path + " holds " + std::to_string(f.count) + " images but " +
                         labels_path + " holds " + std::to_string(label_count) + " labels");
  }
  if (f.count == 0) return Status::Error(images_path + ": holds no images");
  return f;
}

// LMDB's map for `count` records of rows x cols bytes. Generous: every record
// may take an overflow page of its own.
size_t MapSize(int64_t count, int64_t rows, int64_t cols) {
  return static_cast<size_t>(count * (rows * cols + 4096 + 64) + (int64_t{64} << 20));
}

}  // namespace

Result<std::vector<uint8_t>> ReadMnistLabels(const std::string& path) {
  uint32_t count = 0;
  PSTRAIN_ASSIGN_OR_RETURN(auto in, OpenLabels(path, &count));
  std::vector<uint8_t> labels(count);
  PSTRAIN_RETURN_IF_ERROR(in->ReadExact(labels.data(), count, "the labels"));
  PSTRAIN_RETURN_IF_ERROR(in->ExpectEnd(std::to_string(count) + " labels"));
  return labels;
}

Result<MnistConversion> ConvertMnistToLmdb(const std::string& images_path,
                                           const std::string& labels_path,
                                           const std::string& out_path) {
  PSTRAIN_RETURN_IF_ERROR(CheckLmdbOutputFree(out_path));
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<uint8_t> labels, ReadMnistLabels(labels_path));
  PSTRAIN_ASSIGN_OR_RETURN(ImageFile images, OpenImages(images_path, labels_path, labels.size()));
  const uint32_t count = images.count, rows = images.rows, cols = images.cols;
  PSTRAIN_RETURN_IF_ERROR(BuildLmdb(out_path, MapSize(count, rows, cols), [&](LmdbWriter& writer) {
    return WriteRecords(*images.reader, labels, static_cast<int>(rows), static_cast<int>(cols),
                        writer);
  }));
  return MnistConversion{count, static_cast<int>(rows), static_cast<int>(cols)};
}

Result<MnistConversion> ConvertMnistPairs(const std::string& images_path,
                                          const std::string& labels_path,
                                          const std::string& out_path, DbBackend backend,
                                          uint64_t seed) {
  PSTRAIN_RETURN_IF_ERROR(CheckLmdbOutputFree(out_path));
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<uint8_t> labels, ReadMnistLabels(labels_path));
  PSTRAIN_ASSIGN_OR_RETURN(ImageFile images, OpenImages(images_path, labels_path, labels.size()));
  const uint32_t count = images.count, rows = images.rows, cols = images.cols;
  // Pairs pick images at random: all of them in memory (60000 MNIST images: 47 MB).
  const int64_t image_bytes = int64_t{rows} * cols;
  if (count * image_bytes > kMaxPairImagesBytes) {
    return Status::Error(images_path + ": " + std::to_string(count) + " images of " +
                         std::to_string(rows) + " x " + std::to_string(cols) +
                         " are more than the 4 GiB that pairs are drawn from in memory");
  }
  std::string pixels(static_cast<size_t>(count * image_bytes), '\0');
  PSTRAIN_RETURN_IF_ERROR(images.reader->ReadExact(pixels.data(), count * image_bytes,
                                                   std::to_string(count) + " images"));
  PSTRAIN_RETURN_IF_ERROR(images.reader->ExpectEnd(std::to_string(count) + " images"));
  PSTRAIN_RETURN_IF_ERROR(
      BuildRecordDb(out_path, backend, MapSize(count, 2 * rows, cols), [&](RecordWriter& writer) {
        std::mt19937_64 rng(seed);
        caffe::Datum datum;
        datum.set_channels(2);
        datum.set_height(static_cast<int>(rows));
        datum.set_width(static_cast<int>(cols));
        std::string pair(static_cast<size_t>(2 * image_bytes), '\0');
        std::string value;
        char key[32];
        for (uint32_t k = 0; k < count; ++k) {
          const uint64_t i = rng() % count;
          const uint64_t j = rng() % count;
          const size_t size = static_cast<size_t>(image_bytes);
          pair.replace(0, size, pixels, i * size, size);
          pair.replace(size, size, pixels, j * size, size);
          datum.set_data(pair);
          datum.set_label(labels[i] == labels[j] ? 1 : 0);
          datum.SerializeToString(&value);
          std::snprintf(key, sizeof(key), "%08u", k);
          PSTRAIN_RETURN_IF_ERROR(writer.Put(key, value));
        }
        return Status::Ok();
      }));
  return MnistConversion{count, static_cast<int>(rows), static_cast<int>(cols)};
}

}  // namespace pstrain

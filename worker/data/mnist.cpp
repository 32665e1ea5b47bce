#include "worker/data/mnist.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "proto/caffe.pb.h"
#include "worker/data/lmdb_writer.hpp"

namespace pstrain {
namespace {

constexpr uint32_t kImageMagic = 0x00000803;
constexpr uint32_t kLabelMagic = 0x00000801;
constexpr int64_t kMaxImageBytes = int64_t{1} << 26;

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
  PSTRAIN_ASSIGN_OR_RETURN(auto images, GzReader::Open(images_path));
  PSTRAIN_RETURN_IF_ERROR(CheckMagic(*images, kImageMagic, "image"));
  PSTRAIN_ASSIGN_OR_RETURN(uint32_t count, images->ReadBigEndian32("the IDX header"));
  PSTRAIN_ASSIGN_OR_RETURN(uint32_t rows, images->ReadBigEndian32("the IDX header"));
  PSTRAIN_ASSIGN_OR_RETURN(uint32_t cols, images->ReadBigEndian32("the IDX header"));
  if (rows == 0 || cols == 0 || int64_t{rows} * cols > kMaxImageBytes) {
    return Status::Error(images_path + ": bad image size " + std::to_string(rows) + " x " +
                         std::to_string(cols));
  }
  if (count != labels.size()) {
    return Status::Error(images_path + " holds " + std::to_string(count) + " images but " +
                         labels_path + " holds " + std::to_string(labels.size()) + " labels");
  }
  if (count == 0) return Status::Error(images_path + ": holds no images");

  // Generous: every record may take an overflow page of its own.
  const int64_t image_bytes = int64_t{rows} * cols;
  const size_t map_size =
      static_cast<size_t>(int64_t{count} * (image_bytes + 4096 + 64) + (int64_t{64} << 20));
  PSTRAIN_RETURN_IF_ERROR(BuildLmdb(out_path, map_size, [&](LmdbWriter& writer) {
    return WriteRecords(*images, labels, static_cast<int>(rows), static_cast<int>(cols), writer);
  }));
  return MnistConversion{count, static_cast<int>(rows), static_cast<int>(cols)};
}

}  // namespace pstrain

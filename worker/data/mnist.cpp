#include "worker/data/mnist.hpp"

#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "proto/caffe.pb.h"

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

// Owns an LMDB environment opened for writing; the write transaction is
// committed every kCommitEvery records.
class LmdbWriter {
 public:
  static constexpr int kCommitEvery = 1000;

  ~LmdbWriter() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
    if (env_ != nullptr) mdb_env_close(env_);
  }
  Status Open(const std::string& dir, size_t map_size) {
    dir_ = dir;
    PSTRAIN_RETURN_IF_ERROR(Check(mdb_env_create(&env_)));
    PSTRAIN_RETURN_IF_ERROR(Check(mdb_env_set_mapsize(env_, map_size)));
    PSTRAIN_RETURN_IF_ERROR(Check(mdb_env_open(env_, dir.c_str(), 0, 0664)));
    return Begin();
  }
  // REQUIRES: keys in ascending order (they are appended).
  Status Put(const std::string& key, const std::string& value) {
    MDB_val k{key.size(), const_cast<char*>(key.data())};
    MDB_val v{value.size(), const_cast<char*>(value.data())};
    PSTRAIN_RETURN_IF_ERROR(Check(mdb_put(txn_, dbi_, &k, &v, MDB_APPEND)));
    if (++pending_ == kCommitEvery) {
      PSTRAIN_RETURN_IF_ERROR(Commit());
      return Begin();
    }
    return Status::Ok();
  }
  // Commits what is pending and flushes to disk.
  Status Finish() {
    PSTRAIN_RETURN_IF_ERROR(Commit());
    return Check(mdb_env_sync(env_, 1));
  }

 private:
  Status Check(int rc) const {
    if (rc == MDB_SUCCESS) return Status::Ok();
    return Status::Error(dir_ + ": LMDB write failed (" + mdb_strerror(rc) + ")");
  }
  Status Begin() {
    PSTRAIN_RETURN_IF_ERROR(Check(mdb_txn_begin(env_, nullptr, 0, &txn_)));
    return Check(mdb_dbi_open(txn_, nullptr, 0, &dbi_));
  }
  Status Commit() {
    MDB_txn* txn = txn_;
    txn_ = nullptr;
    pending_ = 0;
    return Check(mdb_txn_commit(txn));
  }

  std::string dir_;
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
  MDB_dbi dbi_ = 0;
  int pending_ = 0;
};

// Streams the images into an LMDB at `dir`.
Status WriteRecords(GzReader& images, const std::vector<uint8_t>& labels, int rows, int cols,
                    const std::string& dir) {
  const int64_t image_bytes = int64_t{rows} * cols;
  const int64_t n = static_cast<int64_t>(labels.size());
  // Generous: every record may take an overflow page of its own.
  const size_t map_size = static_cast<size_t>(n * (image_bytes + 4096 + 64) + (int64_t{64} << 20));
  LmdbWriter writer;
  PSTRAIN_RETURN_IF_ERROR(writer.Open(dir, map_size));
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
  PSTRAIN_RETURN_IF_ERROR(images.ExpectEnd(std::to_string(n) + " images"));
  return writer.Finish();
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
  namespace fs = std::filesystem;
  fs::path out = fs::path(out_path);
  if (!out.has_filename()) out = out.parent_path();  // "dir/" -> "dir"
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec))) {
    return Status::Error(out_path + ": already exists (remove it first or choose another path)");
  }
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

  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  const fs::path tmp = out.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec)) {
    return Status::Error(out_path + ": cannot create " + tmp.string() + " (" + ec.message() + ")");
  }
  Status status =
      WriteRecords(*images, labels, static_cast<int>(rows), static_cast<int>(cols), tmp.string());
  if (status.ok()) {
    // RENAME_NOREPLACE: never replace an `out` created meanwhile; plain
    // rename on file systems without it.
    int rc = ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, out.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && errno == EINVAL) rc = ::rename(tmp.c_str(), out.c_str());
    if (rc != 0) {
      status = Status::Error(out_path + ": cannot rename " + tmp.string() + " into place (" +
                             std::strerror(errno) + ")");
    }
  }
  if (!status.ok()) {
    fs::remove_all(tmp, ec);
    return status;
  }
  return MnistConversion{count, static_cast<int>(rows), static_cast<int>(cols)};
}

}  // namespace pstrain

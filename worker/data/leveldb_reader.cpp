#include "worker/data/leveldb_reader.hpp"

#include <leveldb/db.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "worker/data/lmdb_reader.hpp"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

bool HasFile(const std::string& dir, const char* name) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / name, ec);
}

bool EndsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// Copies `from` to `to`, readable and writable by this user only.
Status CopyInto(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::copy_file(from, to, ec);
  if (!ec) fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write, ec);
  if (ec) return Status::IOError("copy " + from.filename().string() + ": " + ec.message());
  return Status::Ok();
}

// Fills the empty directory `view` with the files LevelDB needs to open the
// database in `dir`: hard links to its tables, MANIFEST-* and *.log (a copy
// where a link cannot be made) and a copy of CURRENT. Nothing in `dir`
// changes: LevelDB never writes into a table, and with reuse_logs off (Open
// below) it only reads the old log and manifest, writes new ones beside them
// and unlinks the old names; CURRENT it replaces by a rename. So a
// database whose log holds 256 MB of records costs no copy per reader.
Status FillView(const std::string& dir, const std::string& view) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    if (name == "LOCK" || name.rfind("LOG", 0) == 0) continue;
    const fs::path to = fs::path(view) / name;
    if (EndsWith(name, ".ldb") || EndsWith(name, ".sst") || EndsWith(name, ".log") ||
        name.rfind("MANIFEST-", 0) == 0) {
      if (::link(it->path().c_str(), to.c_str()) == 0) continue;
      const int err = errno;
      if (err != EXDEV && err != EPERM && err != EMLINK && err != EOPNOTSUPP) {
        return Status::IOError("link " + name + ": " + std::strerror(err));
      }
      PSTRAIN_RETURN_IF_ERROR(CopyInto(it->path(), to));
    } else if (name == "CURRENT") {
      PSTRAIN_RETURN_IF_ERROR(CopyInto(it->path(), to));
    }
  }
  if (ec) return Status::IOError("list: " + ec.message());
  return Status::Ok();
}

}  // namespace

DbBackend DetectDbBackend(const std::string& path) {
  return HasFile(path, "CURRENT") && !HasFile(path, "data.mdb") ? DbBackend::kLevelDb
                                                                : DbBackend::kLmdb;
}

Result<std::unique_ptr<RecordReader>> OpenRecordReader(const std::string& path,
                                                       std::optional<DbBackend> backend) {
  const bool lmdb_files = HasFile(path, "data.mdb"), leveldb_files = HasFile(path, "CURRENT");
  const DbBackend use = backend.value_or(DetectDbBackend(path));
  if (use == DbBackend::kLmdb && leveldb_files && !lmdb_files) {
    return Status::InvalidArgument(
        path +
        ": is a LevelDB, not an LMDB (it holds CURRENT and no data.mdb): set "
        "data_param.backend: LEVELDB, or leave it unset to detect the format");
  }
  if (use == DbBackend::kLevelDb && lmdb_files && !leveldb_files) {
    return Status::InvalidArgument(
        path +
        ": is an LMDB, not a LevelDB (it holds data.mdb and no CURRENT): set "
        "data_param.backend: LMDB, or leave it unset to detect the format");
  }
  if (use == DbBackend::kLevelDb) {
    PSTRAIN_ASSIGN_OR_RETURN(auto reader, LevelDbReader::Open(path));
    return std::unique_ptr<RecordReader>(std::move(reader));
  }
  PSTRAIN_ASSIGN_OR_RETURN(auto reader, LmdbReader::Open(path));
  return std::unique_ptr<RecordReader>(std::move(reader));
}

Result<std::unique_ptr<LevelDbReader>> LevelDbReader::Open(const std::string& path) {
  // Checked first, so a refused folder is left as it was (LevelDB itself
  // would leave LOCK and LOG behind).
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return Status::NotFound(path + ": does not exist");
  if (!fs::is_directory(st)) return Status::NotFound(path + ": is not a folder");
  if (!HasFile(path, "CURRENT"))
    return Status::NotFound(path + ": is not a LevelDB (no CURRENT file)");

  std::unique_ptr<LevelDbReader> reader(new LevelDbReader(path));
  const fs::path temp = fs::temp_directory_path(ec);
  if (ec) {
    return Status::IOError(
        path + ": cannot make a private view of the LevelDB (no temp dir: " + ec.message() + ")");
  }
  std::string pattern = (temp / "pstrain-leveldb-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return Status::IOError(path + ": cannot make a private view of the LevelDB in " +
                           temp.string() + " (" + std::strerror(errno) + ")");
  }
  reader->view_ = pattern;  // deleted with the reader from here on
  if (Status filled = FillView(path, reader->view_); !filled.ok()) {
    return Status::IOError(path + ": cannot make a private view of the LevelDB in " +
                           temp.string() + " (" + filled.message() + ")");
  }
  leveldb::Options options;
  options.create_if_missing = false;
  options.paranoid_checks = true;
  options.reuse_logs = false;  // FillView's links rely on it: old files are only read
  leveldb::DB* db = nullptr;
  leveldb::Status s = leveldb::DB::Open(options, reader->view_, &db);
  if (!s.ok()) return Status::IOError(path + ": cannot open LevelDB (" + s.ToString() + ")");
  reader->db_.reset(db);
  leveldb::ReadOptions read;
  read.fill_cache = false;
  reader->it_.reset(reader->db_->NewIterator(read));
  for (reader->it_->SeekToFirst(); reader->it_->Valid(); reader->it_->Next()) ++reader->count_;
  if (!reader->it_->status().ok()) {
    return Status::Corruption(path + ": cannot read LevelDB (" + reader->it_->status().ToString() +
                              ")");
  }
  reader->it_->SeekToFirst();
  return reader;
}

LevelDbReader::LevelDbReader(std::string path) : path_(std::move(path)) {}

LevelDbReader::~LevelDbReader() {
  it_.reset();  // before the database
  db_.reset();  // before its files
  if (!view_.empty()) {
    std::error_code ec;
    fs::remove_all(view_, ec);
  }
}

Status LevelDbReader::EmptyError() const { return Status::Error(path_ + ": LevelDB is empty"); }

Status LevelDbReader::Rewind() {
  it_->SeekToFirst();
  position_ = 0;
  if (!it_->Valid()) {
    return Status::Corruption(path_ + ": cannot read record 0 (" + it_->status().ToString() + ")");
  }
  return Status::Ok();
}

Status LevelDbReader::Step() {
  it_->Next();
  ++position_;
  if (it_->Valid()) return Status::Ok();
  if (!it_->status().ok()) {
    return Status::Corruption(path_ + ": cannot read record " + std::to_string(position_) + " (" +
                              it_->status().ToString() + ")");
  }
  return Rewind();
}

Status LevelDbReader::Seek(int64_t k) {
  if (count_ == 0) return EmptyError();
  int64_t target = k % count_;
  if (target < 0) target += count_;
  if (target < position_ || !it_->Valid()) PSTRAIN_RETURN_IF_ERROR(Rewind());
  while (position_ < target) PSTRAIN_RETURN_IF_ERROR(Step());
  return Status::Ok();
}

Status LevelDbReader::Next(DbRecord* record) {
  if (count_ == 0) return EmptyError();
  if (!it_->Valid()) PSTRAIN_RETURN_IF_ERROR(Rewind());
  key_.assign(it_->key().data(), it_->key().size());
  value_.assign(it_->value().data(), it_->value().size());
  record->index = position_;
  record->key = key_;
  record->value = value_;
  return Step();
}

}  // namespace pstrain

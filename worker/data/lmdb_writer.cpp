#include "worker/data/lmdb_writer.hpp"

#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace pstrain {

namespace fs = std::filesystem;

LmdbWriter::~LmdbWriter() {
  if (txn_ != nullptr) mdb_txn_abort(txn_);
  if (env_ != nullptr) mdb_env_close(env_);
}

Status LmdbWriter::Open(const std::string& dir, size_t map_size) {
  dir_ = dir;
  PSTRAIN_RETURN_IF_ERROR(Check(mdb_env_create(&env_)));
  PSTRAIN_RETURN_IF_ERROR(Check(mdb_env_set_mapsize(env_, map_size)));
  PSTRAIN_RETURN_IF_ERROR(Check(mdb_env_open(env_, dir.c_str(), 0, 0664)));
  return Begin();
}

Status LmdbWriter::Put(const std::string& key, const std::string& value) {
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{value.size(), const_cast<char*>(value.data())};
  PSTRAIN_RETURN_IF_ERROR(Check(mdb_put(txn_, dbi_, &k, &v, MDB_APPEND)));
  if (++pending_ == kCommitEvery) {
    PSTRAIN_RETURN_IF_ERROR(Commit());
    return Begin();
  }
  return Status::Ok();
}

Status LmdbWriter::Finish() {
  PSTRAIN_RETURN_IF_ERROR(Commit());
  return Check(mdb_env_sync(env_, 1));
}

Status LmdbWriter::Check(int rc) const {
  if (rc == MDB_SUCCESS) return Status::Ok();
  return Status::IOError(dir_ + ": LMDB write failed (" + mdb_strerror(rc) + ")");
}

Status LmdbWriter::Begin() {
  PSTRAIN_RETURN_IF_ERROR(Check(mdb_txn_begin(env_, nullptr, 0, &txn_)));
  MDB_dbi dbi = 0;
  PSTRAIN_RETURN_IF_ERROR(Check(mdb_dbi_open(txn_, nullptr, 0, &dbi)));
  dbi_ = dbi;
  return Status::Ok();
}

Status LmdbWriter::Commit() {
  MDB_txn* txn = txn_;
  txn_ = nullptr;
  pending_ = 0;
  return Check(mdb_txn_commit(txn));
}

namespace {

fs::path OutputPath(const std::string& out_path) {
  fs::path out(out_path);
  if (!out.has_filename()) out = out.parent_path();  // "dir/" -> "dir"
  return out;
}

}  // namespace

Status CheckLmdbOutputFree(const std::string& out_path) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(OutputPath(out_path), ec))) {
    return Status::InvalidArgument(out_path +
                                   ": already exists (remove it first or choose another path)");
  }
  return Status::Ok();
}

Status BuildFolderAtomically(const std::string& out_path,
                             const std::function<Status(const std::string& tmp)>& build) {
  PSTRAIN_RETURN_IF_ERROR(CheckLmdbOutputFree(out_path));
  const fs::path out = OutputPath(out_path);
  std::error_code ec;
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  const fs::path tmp = out.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec)) {
    return Status::IOError(out_path + ": cannot create " + tmp.string() + " (" + ec.message() +
                           ")");
  }
  Status status = build(tmp.string());
  if (status.ok()) {
    // RENAME_NOREPLACE: never replace an `out` created meanwhile; plain
    // rename on file systems without it.
    int rc = ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, out.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && errno == EINVAL) rc = ::rename(tmp.c_str(), out.c_str());
    if (rc != 0) {
      status = Status::IOError(out_path + ": cannot rename " + tmp.string() + " into place (" +
                               std::strerror(errno) + ")");
    }
  }
  if (!status.ok()) fs::remove_all(tmp, ec);
  return status;
}

Status BuildLmdb(const std::string& out_path, size_t map_size,
                 const std::function<Status(LmdbWriter&)>& write) {
  return BuildFolderAtomically(out_path, [&](const std::string& tmp) {
    LmdbWriter writer;  // the environment is closed before the rename
    Status status = writer.Open(tmp, map_size);
    if (status.ok()) status = write(writer);
    if (status.ok()) status = writer.Finish();
    return status;
  });
}

}  // namespace pstrain

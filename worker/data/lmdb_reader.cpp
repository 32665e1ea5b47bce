#include "worker/data/lmdb_reader.hpp"

#include <lmdb.h>

#include <cerrno>

namespace pstrain {

Result<std::unique_ptr<LmdbReader>> LmdbReader::Open(const std::string& path) {
  std::unique_ptr<LmdbReader> reader(new LmdbReader(path));
  auto fail = [&](int rc) {
    const std::string message = path + ": cannot open LMDB (" + mdb_strerror(rc) + ")";
    return rc == ENOENT ? Status::NotFound(message) : Status::IOError(message);
  };
  int rc = mdb_env_create(&reader->env_);
  if (rc != MDB_SUCCESS) return fail(rc);
  rc = mdb_env_open(reader->env_, path.c_str(), MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK, 0664);
  if (rc != MDB_SUCCESS) return fail(rc);
  rc = mdb_txn_begin(reader->env_, nullptr, MDB_RDONLY, &reader->txn_);
  if (rc != MDB_SUCCESS) return fail(rc);
  MDB_dbi dbi;
  rc = mdb_dbi_open(reader->txn_, nullptr, 0, &dbi);
  if (rc != MDB_SUCCESS) return fail(rc);
  reader->dbi_ = dbi;
  MDB_stat stat;
  rc = mdb_stat(reader->txn_, dbi, &stat);
  if (rc != MDB_SUCCESS) return fail(rc);
  reader->count_ = static_cast<int64_t>(stat.ms_entries);
  rc = mdb_cursor_open(reader->txn_, dbi, &reader->cursor_);
  if (rc != MDB_SUCCESS) return fail(rc);
  if (reader->count_ > 0) PSTRAIN_RETURN_IF_ERROR(reader->Step(MDB_FIRST));
  return reader;
}

LmdbReader::~LmdbReader() {
  if (cursor_ != nullptr) mdb_cursor_close(cursor_);
  if (txn_ != nullptr) mdb_txn_abort(txn_);
  if (env_ != nullptr) mdb_env_close(env_);
}

Status LmdbReader::EmptyError() const { return Status::Error(path_ + ": LMDB is empty"); }

Status LmdbReader::Step(unsigned op) {
  MDB_val key, value;
  int rc = mdb_cursor_get(cursor_, &key, &value, static_cast<MDB_cursor_op>(op));
  if (rc == MDB_NOTFOUND && op == MDB_NEXT) {
    rc = mdb_cursor_get(cursor_, &key, &value, MDB_FIRST);
    position_ = 0;
  } else if (op == MDB_FIRST) {
    position_ = 0;
  } else {
    ++position_;
  }
  if (rc != MDB_SUCCESS) {
    return Status::Corruption(path_ + ": cannot read record " + std::to_string(position_) + " (" +
                              mdb_strerror(rc) + ")");
  }
  current_.index = position_;
  current_.key = std::string_view(static_cast<const char*>(key.mv_data), key.mv_size);
  current_.value = std::string_view(static_cast<const char*>(value.mv_data), value.mv_size);
  return Status::Ok();
}

Status LmdbReader::Seek(int64_t k) {
  if (count_ == 0) return EmptyError();
  int64_t target = k % count_;
  if (target < 0) target += count_;
  if (target < position_) PSTRAIN_RETURN_IF_ERROR(Step(MDB_FIRST));
  while (position_ < target) PSTRAIN_RETURN_IF_ERROR(Step(MDB_NEXT));
  return Status::Ok();
}

Status LmdbReader::Next(LmdbRecord* record) {
  if (count_ == 0) return EmptyError();
  *record = current_;
  return Step(MDB_NEXT);
}

}  // namespace pstrain

#include "worker/data/leveldb_writer.hpp"

#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <cctype>

#include "worker/data/lmdb_writer.hpp"

namespace pstrain {

LevelDbWriter::LevelDbWriter() = default;

LevelDbWriter::~LevelDbWriter() = default;

Status LevelDbWriter::Open(const std::string& dir) {
  dir_ = dir;
  leveldb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  options.write_buffer_size = 256 << 20;  // as Caffe's converters
  leveldb::DB* db = nullptr;
  leveldb::Status s = leveldb::DB::Open(options, dir, &db);
  if (!s.ok()) return Status::IOError(dir + ": cannot create LevelDB (" + s.ToString() + ")");
  db_.reset(db);
  batch_ = std::make_unique<leveldb::WriteBatch>();
  return Status::Ok();
}

Status LevelDbWriter::Flush(bool sync) {
  leveldb::WriteOptions options;
  options.sync = sync;
  leveldb::Status s = db_->Write(options, batch_.get());
  if (!s.ok()) return Status::IOError(dir_ + ": LevelDB write failed (" + s.ToString() + ")");
  batch_->Clear();
  pending_ = 0;
  return Status::Ok();
}

Status LevelDbWriter::Put(const std::string& key, const std::string& value) {
  batch_->Put(key, value);
  if (++pending_ >= kBatch) return Flush(false);
  return Status::Ok();
}

Status LevelDbWriter::Finish() {
  PSTRAIN_RETURN_IF_ERROR(Flush(true));
  batch_.reset();
  db_.reset();
  return Status::Ok();
}

Status BuildLevelDb(const std::string& out, const std::function<Status(LevelDbWriter&)>& write) {
  return BuildFolderAtomically(out, [&](const std::string& tmp) {
    LevelDbWriter writer;
    Status status = writer.Open(tmp);
    if (status.ok()) status = write(writer);
    if (status.ok()) status = writer.Finish();
    return status;
  });
}

Result<DbBackend> ParseDbBackend(const std::string& name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "lmdb") return DbBackend::kLmdb;
  if (lower == "leveldb") return DbBackend::kLevelDb;
  return Status::InvalidArgument("--backend " + name + ": expected lmdb or leveldb");
}

Status BuildRecordDb(const std::string& out, DbBackend backend, size_t map_size,
                     const std::function<Status(RecordWriter&)>& write) {
  if (backend == DbBackend::kLevelDb) {
    return BuildLevelDb(out, [&](LevelDbWriter& w) { return write(w); });
  }
  return BuildLmdb(out, map_size, [&](LmdbWriter& w) { return write(w); });
}

}  // namespace pstrain

#include "worker/data/leveldb_reader.hpp"

#include <leveldb/db.h>

#include "worker/data/lmdb_reader.hpp"

namespace pstrain {

Result<std::unique_ptr<RecordReader>> OpenRecordReader(const std::string& path, DbBackend backend) {
  if (backend == DbBackend::kLevelDb) {
    PSTRAIN_ASSIGN_OR_RETURN(auto reader, LevelDbReader::Open(path));
    return std::unique_ptr<RecordReader>(std::move(reader));
  }
  PSTRAIN_ASSIGN_OR_RETURN(auto reader, LmdbReader::Open(path));
  return std::unique_ptr<RecordReader>(std::move(reader));
}

Result<std::unique_ptr<LevelDbReader>> LevelDbReader::Open(const std::string& path) {
  std::unique_ptr<LevelDbReader> reader(new LevelDbReader(path));
  leveldb::Options options;
  options.create_if_missing = false;
  options.paranoid_checks = true;
  leveldb::DB* db = nullptr;
  leveldb::Status s = leveldb::DB::Open(options, path, &db);
  if (!s.ok()) {
    const std::string message = path + ": cannot open LevelDB (" + s.ToString() + ")";
    return s.IsNotFound() || s.IsInvalidArgument() ? Status::NotFound(message)
                                                   : Status::IOError(message);
  }
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
  db_.reset();
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

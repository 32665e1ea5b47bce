// Writing a new LevelDB of records, all or nothing (as lmdb_writer.hpp's
// BuildLmdb): what `ps-data ... --backend leveldb` writes, Caffe's
// convert_imageset -backend leveldb layout (one record a key).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "worker/data/record_writer.hpp"

namespace leveldb {
class DB;
class WriteBatch;
}  // namespace leveldb

namespace pstrain {

// Appends records to a LevelDB being built, in write batches of kBatch
// records (Caffe's converters write 1000 at a time). One thread.
class LevelDbWriter : public RecordWriter {
 public:
  static constexpr int kBatch = 1000;

  LevelDbWriter();
  ~LevelDbWriter() override;
  LevelDbWriter(const LevelDbWriter&) = delete;
  LevelDbWriter& operator=(const LevelDbWriter&) = delete;

  // Creates a new LevelDB in `dir` (which must not hold one).
  Status Open(const std::string& dir);
  Status Put(const std::string& key, const std::string& value) override;
  // Writes what is pending, synced, and closes the database.
  Status Finish();

 private:
  Status Flush(bool sync);

  std::string dir_;
  std::unique_ptr<leveldb::DB> db_;
  std::unique_ptr<leveldb::WriteBatch> batch_;
  int pending_ = 0;
};

// Builds a new LevelDB at `out` as BuildLmdb builds an LMDB (see there).
Status BuildLevelDb(const std::string& out, const std::function<Status(LevelDbWriter&)>& write);

}  // namespace pstrain

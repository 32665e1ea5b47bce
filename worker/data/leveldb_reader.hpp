// LevelDbReader: read-only sequential access to a LevelDB of Caffe records
// (what Caffe's convert_imageset -backend leveldb and convert_mnist_data
// write), for data_param.backend LEVELDB.
//
// LevelDB locks a database while it is open (its LOCK file), so one process
// at a time can read it: a second reader (another worker on the same host, or
// a train and a test net of one process on the same source) is refused with
// LevelDB's lock error. count() comes from one pass over the keys at Open.
// REQUIRES: nobody writes the database while it is read.
#pragma once

#include <memory>
#include <string>

#include "worker/data/record_reader.hpp"

namespace leveldb {
class DB;
class Iterator;
}  // namespace leveldb

namespace pstrain {

class LevelDbReader : public RecordReader {
 public:
  // Errors: "<path>: cannot open LevelDB (<LevelDB's reason>)" (NotFound for
  // a folder that holds no LevelDB; IOError otherwise, a held lock included).
  static Result<std::unique_ptr<LevelDbReader>> Open(const std::string& path);
  ~LevelDbReader() override;
  LevelDbReader(const LevelDbReader&) = delete;
  LevelDbReader& operator=(const LevelDbReader&) = delete;

  const std::string& path() const override { return path_; }
  int64_t count() const override { return count_; }
  const char* backend_name() const override { return "LevelDB"; }
  int64_t position() const { return position_; }
  Status Seek(int64_t k) override;
  Status Next(DbRecord* record) override;

 private:
  explicit LevelDbReader(std::string path);
  Status Rewind();
  Status Step();  // advances the iterator by one, wrapping
  Status EmptyError() const;

  std::string path_;
  std::unique_ptr<leveldb::DB> db_;
  std::unique_ptr<leveldb::Iterator> it_;
  int64_t count_ = 0;
  int64_t position_ = 0;     // of the iterator's record
  std::string key_, value_;  // the record Next returned last
};

}  // namespace pstrain

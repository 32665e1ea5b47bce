// LevelDbReader: read-only sequential access to a LevelDB of Caffe records
// (what Caffe's convert_imageset -backend leveldb and convert_mnist_data
// write), for data_param.backend LEVELDB.
//
// The user's folder is never opened by LevelDB, which would lock it (its LOCK
// file lets one process in) and write into it (LOG files, the recovery of its
// log into a new table, a new MANIFEST). Open makes a private view instead: a
// fresh directory <temp>/pstrain-leveldb-XXXXXX (mkdtemp, mode 0700, under
// std::filesystem::temp_directory_path(), so $TMPDIR) that holds hard links to
// the database's tables, MANIFEST-* and *.log (LevelDB, with reuse_logs off,
// only reads those and writes new files beside them) and a copy of CURRENT
// (replaced by a rename); LOCK and LOG* are left out. A file whose hard link
// fails (EXDEV: the temp dir is on another filesystem;
// EPERM: a file of another user under protected_hardlinks) is copied. LevelDB
// opens the view, so any number of readers (workers on one host, a train and
// a test net on one source) read one database at once. The destructor deletes
// the view; a process that dies without it leaves the view (links and small
// copies) behind in the temp dir, and nothing in the user's folder.
// count() comes from one pass over the keys at Open.
// REQUIRES: nobody writes the database while it is opened or read.
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
  // Checks `path` before anything is made, then opens a private view of it.
  // Errors: NotFound "<path>: does not exist", "<path>: is not a folder",
  // "<path>: is not a LevelDB (no CURRENT file)"; IOError "<path>: cannot make
  // a private view of the LevelDB in <temp dir> (<reason>)", "<path>: cannot
  // open LevelDB (<LevelDB's reason>)"; Corruption "<path>: cannot read
  // LevelDB (...)".
  static Result<std::unique_ptr<LevelDbReader>> Open(const std::string& path);
  ~LevelDbReader() override;
  LevelDbReader(const LevelDbReader&) = delete;
  LevelDbReader& operator=(const LevelDbReader&) = delete;

  const std::string& path() const override { return path_; }
  // The private view LevelDB has open (deleted by the destructor).
  const std::string& view() const { return view_; }
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
  std::string view_;  // empty until made
  std::unique_ptr<leveldb::DB> db_;
  std::unique_ptr<leveldb::Iterator> it_;
  int64_t count_ = 0;
  int64_t position_ = 0;     // of the iterator's record
  std::string key_, value_;  // the record Next returned last
};

}  // namespace pstrain

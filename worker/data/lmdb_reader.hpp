// LmdbReader: read-only sequential access to an LMDB of Caffe records.
//
// The environment is opened with MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK: no lock
// file is touched, so any number of processes (and read-only folders) can read
// the same LMDB at once. REQUIRES: nobody writes the LMDB while it is read
// (PSTrain's writer builds a new LMDB under a temporary name and renames it).
// One read transaction lives as long as the reader; MDB_NOTLS lets it be used
// from a thread other than the one that opened it, but by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.hpp"
#include "worker/data/record_reader.hpp"

struct MDB_env;
struct MDB_txn;
struct MDB_cursor;

namespace pstrain {

// One record. key and value point into the memory map and stay valid as long
// as the reader that returned them lives.
using LmdbRecord = DbRecord;

class LmdbReader : public RecordReader {
 public:
  // Errors: "<path>: cannot open LMDB (<reason>)" for a missing folder or one
  // that holds no LMDB.
  static Result<std::unique_ptr<LmdbReader>> Open(const std::string& path);
  ~LmdbReader() override;
  LmdbReader(const LmdbReader&) = delete;
  LmdbReader& operator=(const LmdbReader&) = delete;

  const std::string& path() const override { return path_; }
  int64_t count() const override { return count_; }
  const char* backend_name() const override { return "LMDB"; }
  // Index of the record the next call to Next() returns.
  int64_t position() const { return position_; }

  // Positions the cursor at record k mod count(). Steps forward from the
  // current position when that is shorter, else from the first record.
  // REQUIRES: count() > 0 (an error otherwise).
  Status Seek(int64_t k) override;
  // Returns the record at the cursor and advances, wrapping to the first
  // record after the last. REQUIRES: count() > 0 (an error otherwise).
  Status Next(LmdbRecord* record) override;

 private:
  explicit LmdbReader(std::string path) : path_(std::move(path)) {}
  Status Step(unsigned op);  // moves the cursor with MDB_FIRST / MDB_NEXT
  Status EmptyError() const;

  std::string path_;
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  unsigned dbi_ = 0;
  int64_t count_ = 0;
  int64_t position_ = 0;
  LmdbRecord current_;
};

}  // namespace pstrain

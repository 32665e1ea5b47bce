// Writing a new LMDB of records, all or nothing.
//
// BuildLmdb creates the LMDB in a temporary folder next to `out` and renames
// it into place only when every record is written and synced, so a crash or an
// error never leaves a partial LMDB under the name `out` (readers rely on
// this: see lmdb_reader.hpp). Missing parent folders are created; an existing
// `out` is refused. Used by ps-data's converters.
#pragma once

#include <functional>
#include <string>

#include "common/status.hpp"
#include "worker/data/record_writer.hpp"

struct MDB_env;
struct MDB_txn;

namespace pstrain {

// Appends records to an LMDB being built; commits every kCommitEvery records.
// One thread.
class LmdbWriter : public RecordWriter {
 public:
  static constexpr int kCommitEvery = 1000;

  LmdbWriter() = default;
  ~LmdbWriter() override;
  LmdbWriter(const LmdbWriter&) = delete;
  LmdbWriter& operator=(const LmdbWriter&) = delete;

  // Opens a new environment in the existing empty folder `dir` with a map of
  // `map_size` bytes.
  Status Open(const std::string& dir, size_t map_size);
  // REQUIRES: keys in strictly ascending byte order (records are appended).
  Status Put(const std::string& key, const std::string& value) override;
  // Commits what is pending and flushes to disk.
  Status Finish();

 private:
  Status Check(int rc) const;
  Status Begin();
  Status Commit();

  std::string dir_;
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
  unsigned dbi_ = 0;
  int pending_ = 0;
};

// Builds a new LMDB at `out`: refuses an existing `out` ("<out>: already
// exists (remove it first or choose another path)"), then calls
// write(writer) on a writer opened in a temporary folder with `map_size`, and
// on success Finish()es and renames the folder to `out`. On any error the
// temporary folder is removed and `out` is untouched.
Status BuildLmdb(const std::string& out, size_t map_size,
                 const std::function<Status(LmdbWriter&)>& write);

// Refuses an existing `out` as BuildLmdb does, without writing anything (so a
// converter can check before reading its inputs).
Status CheckLmdbOutputFree(const std::string& out);

}  // namespace pstrain

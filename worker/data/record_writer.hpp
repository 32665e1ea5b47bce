// RecordWriter: appends records to a new database being built, whichever
// backend (LmdbWriter in lmdb_writer.hpp, LevelDbWriter in leveldb_writer.hpp).
// BuildRecordDb builds a new database of either kind all or nothing.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "common/status.hpp"
#include "worker/data/record_reader.hpp"

namespace pstrain {

class RecordWriter {
 public:
  virtual ~RecordWriter() = default;
  // REQUIRES: keys in strictly ascending byte order.
  virtual Status Put(const std::string& key, const std::string& value) = 0;
};

// "lmdb" / "leveldb" (case-insensitive) -> backend; else an error
// "--backend <name>: expected lmdb or leveldb".
Result<DbBackend> ParseDbBackend(const std::string& name);

// BuildLmdb or BuildLevelDb (`map_size` is LMDB's): refuses an existing
// `out`, writes into a temporary folder next to it and renames it into place
// only when every record is written; on error `out` is untouched.
Status BuildRecordDb(const std::string& out, DbBackend backend, size_t map_size,
                     const std::function<Status(RecordWriter&)>& write);

// The all-or-nothing step both use: refuses an existing `out`, creates a
// temporary folder next to it, runs build(tmp) and renames tmp to `out` when
// it succeeds (removes tmp when it fails).
Status BuildFolderAtomically(const std::string& out,
                             const std::function<Status(const std::string& tmp)>& build);

}  // namespace pstrain

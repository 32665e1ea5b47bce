// RecordReader: sequential access, in key order, to a database of Caffe
// records (Datums), whichever backend holds it: LMDB (lmdb_reader.hpp) or
// LevelDB (leveldb_reader.hpp), data_param.backend's two choices.
// One thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.hpp"

namespace pstrain {

// One record. key and value stay valid until the next Seek or Next on the
// reader that returned them (LMDB's stay valid as long as the reader lives).
struct DbRecord {
  int64_t index = 0;  // position in key order, 0-based
  std::string_view key;
  std::string_view value;
};

class RecordReader {
 public:
  virtual ~RecordReader() = default;
  virtual const std::string& path() const = 0;
  virtual int64_t count() const = 0;
  // Positions the cursor at record k mod count(). REQUIRES: count() > 0
  // (an error otherwise).
  virtual Status Seek(int64_t k) = 0;
  // Returns the record at the cursor and advances, wrapping to the first
  // record after the last. REQUIRES: count() > 0 (an error otherwise).
  virtual Status Next(DbRecord* record) = 0;
  // "LMDB" or "LevelDB", for messages.
  virtual const char* backend_name() const = 0;
};

enum class DbBackend { kLmdb, kLevelDb };

// The backend a folder's files show: LevelDB when it holds CURRENT and no
// data.mdb, LMDB otherwise (data.mdb, or neither: a missing or empty folder is
// left to the LMDB reader's own error). Reads the folder's listing only.
DbBackend DetectDbBackend(const std::string& path);

// Opens `path` for data_param.backend: nullopt (backend unset) detects the
// format with DetectDbBackend; a named backend is honoured exactly, and a
// folder that holds the other format is refused:
//   "<path>: is a LevelDB, not an LMDB (it holds CURRENT and no data.mdb): set
//    data_param.backend: LEVELDB, or leave it unset to detect the format"
// (and the same with the two swapped). Otherwise LmdbReader::Open's or
// LevelDbReader::Open's errors.
Result<std::unique_ptr<RecordReader>> OpenRecordReader(const std::string& path,
                                                       std::optional<DbBackend> backend);

}  // namespace pstrain

// ShardedBatchReader: the batches one worker reads from an LMDB (or a LevelDB)
// of Datums.
//
// Worker `rank` of `world_size` with batch size B reads, for global step t,
// records [(t*W + rank)*B, (t*W + rank + 1)*B) modulo the record count, in key
// order, and transforms them with a DataTransformer. So W workers with batch
// B together see, at every step, exactly the records one worker with batch
// W*B sees. The random draws (mirror, crop) of the sample at global position
// p = (t*W + rank)*B + i come from an Rng seeded with MixSeed(seed, p): they
// depend only on the seed and the sample's place in the stream, never on
// thread timing, and W workers draw exactly what one worker with W*B draws.
// Dropout keys its masks by the same position (FirstSample, which the data
// layer reports with each batch).
// One thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "proto/caffe.pb.h"
#include "worker/data/image_codec.hpp"
#include "worker/data/record_reader.hpp"
#include "worker/data/transform.hpp"

namespace pstrain {

struct ShardSpec {
  int rank = 0;
  int world_size = 1;
  int batch_size = 1;
  uint64_t seed = 0;
};

// data_param.backend as a DbBackend; nullopt when it is unset, which detects
// the format from the folder (OpenRecordReader): Caffe reads an unset backend
// as LEVELDB (its default), PSTrain's converters and nets use LMDB, and
// detection serves both.
inline std::optional<DbBackend> BackendOf(const caffe::DataParameter& p) {
  if (!p.has_backend()) return std::nullopt;
  return p.backend() == caffe::DataParameter::LEVELDB ? DbBackend::kLevelDb : DbBackend::kLmdb;
}

class ShardedBatchReader {
 public:
  // Opens `source`, reads and validates its first record (which fixes the
  // shape every record must have; encoded records are decoded first, see
  // ParseDatum), and sets up the transformer. Errors:
  // OpenRecordReader's (a backend of nullopt detects the format), "<source>:
  // LMDB is empty" (or LevelDB), a bad first record (named by DescribeRecord),
  // transform_param errors.
  static Result<std::unique_ptr<ShardedBatchReader>> Open(
      const std::string& source, const caffe::TransformationParameter& transform,
      caffe::Phase phase, const ShardSpec& shard,
      std::optional<DbBackend> backend = DbBackend::kLmdb);

  // {B, C, H', W'}.
  std::vector<int> data_shape() const { return transformer_.OutputShape(shard_.batch_size); }
  int64_t record_count() const { return reader_->count(); }
  // Index of the first record of global step t (before the modulo).
  int64_t FirstSample(int64_t t) const;

  // Fills `data` (B * C*H'*W' floats) and `label` (B floats) with batch t.
  // Errors name the record: a corrupt Datum, or one whose shape differs from
  // the first record's. REQUIRES: t >= 0; data and label sized as above.
  Status Read(int64_t t, float* data, float* label);

 private:
  ShardedBatchReader(std::unique_ptr<RecordReader> reader, DataTransformer transformer,
                     const ShardSpec& shard)
      : reader_(std::move(reader)), transformer_(std::move(transformer)), shard_(shard) {}

  std::unique_ptr<RecordReader> reader_;
  DataTransformer transformer_;
  ShardSpec shard_;
  caffe::Datum first_;                      // shape reference
  caffe::Datum datum_;                      // reused per record
  ImageColor color_ = ImageColor::kNative;  // how encoded records are decoded
};

}  // namespace pstrain

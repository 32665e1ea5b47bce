#include "worker/data/batch_reader.hpp"

#include "worker/data/datum.hpp"

namespace pstrain {

Result<std::unique_ptr<ShardedBatchReader>> ShardedBatchReader::Open(
    const std::string& source, const caffe::TransformationParameter& transform, caffe::Phase phase,
    const ShardSpec& shard, std::optional<DbBackend> backend) {
  PSTRAIN_ASSIGN_OR_RETURN(ImageColor color, DecodeColorOf(transform));
  PSTRAIN_ASSIGN_OR_RETURN(auto reader, OpenRecordReader(source, backend));
  if (reader->count() == 0) {
    return Status::Error(source + ": " + reader->backend_name() + " is empty");
  }
  DbRecord record;
  PSTRAIN_RETURN_IF_ERROR(reader->Next(&record));
  caffe::Datum first;
  PSTRAIN_RETURN_IF_ERROR(
      ParseDatum(record.value, DescribeRecord(source, record.index, record.key), &first, color));
  PSTRAIN_ASSIGN_OR_RETURN(
      DataTransformer transformer,
      DataTransformer::Create(transform, phase, first.channels(), first.height(), first.width()));
  std::unique_ptr<ShardedBatchReader> batches(
      new ShardedBatchReader(std::move(reader), std::move(transformer), shard));
  batches->first_ = std::move(first);
  batches->color_ = color;
  return batches;
}

int64_t ShardedBatchReader::FirstSample(int64_t t) const {
  return (t * shard_.world_size + shard_.rank) * int64_t{shard_.batch_size};
}

Status ShardedBatchReader::Read(int64_t t, float* data, float* label) {
  const int64_t first_sample = FirstSample(t);
  PSTRAIN_RETURN_IF_ERROR(reader_->Seek(first_sample));
  const int64_t per_item = transformer_.output_count();
  const bool random = transformer_.NeedsRandom();
  DbRecord record;
  for (int i = 0; i < shard_.batch_size; ++i) {
    PSTRAIN_RETURN_IF_ERROR(reader_->Next(&record));
    const std::string where = DescribeRecord(reader_->path(), record.index, record.key);
    PSTRAIN_RETURN_IF_ERROR(ParseDatum(record.value, where, &datum_, color_));
    if (datum_.channels() != first_.channels() || datum_.height() != first_.height() ||
        datum_.width() != first_.width()) {
      return Status::Error(where + ": shape " + DatumShapeString(datum_) +
                           " differs from the first record's " + DatumShapeString(first_));
    }
    if (random) {
      Rng rng(MixSeed(shard_.seed, static_cast<uint64_t>(first_sample + i)));
      transformer_.Transform(datum_, &rng, data + i * per_item);
    } else {
      transformer_.Transform(datum_, nullptr, data + i * per_item);
    }
    label[i] = static_cast<float>(datum_.label());
  }
  return Status::Ok();
}

}  // namespace pstrain

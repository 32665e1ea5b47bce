#include "worker/data/image_set.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/proto_io.hpp"
#include "proto/caffe.pb.h"
#include "worker/data/datum.hpp"
#include "worker/data/image_codec.hpp"
#include "worker/data/lmdb_reader.hpp"
#include "worker/data/lmdb_writer.hpp"
#include "worker/data/record_writer.hpp"

namespace pstrain {
namespace {

// Virtual address space only: LMDB grows its file as records are written.
constexpr size_t kImageSetMapSize = size_t{1} << 40;

Status CheckOptions(const ImageSetOptions& o) {
  PSTRAIN_RETURN_IF_ERROR(ParseDbBackend(o.backend).status());
  if ((o.resize_height > 0) != (o.resize_width > 0) || o.resize_height < 0 || o.resize_width < 0) {
    return Status::InvalidArgument(
        "--resize_height and --resize_width go together (both > 0 to resize, both 0 not to); got " +
        std::to_string(o.resize_height) + " and " + std::to_string(o.resize_width));
  }
  if (!o.encode_type.empty() && ParseImageFormat(o.encode_type) == ImageFormat::kUnknown) {
    return Status::InvalidArgument("--encode_type " + o.encode_type + ": expected png or jpg");
  }
  if (!o.encode_type.empty() && !o.encoded) {
    return Status::InvalidArgument("--encode_type " + o.encode_type +
                                   " needs --encoded (raw records hold pixels, not files)");
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<ListEntry>> ReadImageList(const std::string& list_file) {
  std::ifstream in(list_file);
  if (!in) {
    return Status::NotFound(list_file + ": cannot open (" + std::strerror(errno) + ")");
  }
  std::vector<ListEntry> entries;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string place = list_file + ":" + std::to_string(number) + ": ";
    const size_t space = line.find_last_of(" \t");
    if (space == std::string::npos) {
      return Status::InvalidArgument(place + "expected 'PATH LABEL', got '" + line + "'");
    }
    std::string path = line.substr(0, space);
    while (!path.empty() && (path.back() == ' ' || path.back() == '\t')) path.pop_back();
    const std::string label = line.substr(space + 1);
    int value = 0;
    const auto [end, ec] = std::from_chars(label.data(), label.data() + label.size(), value);
    if (ec != std::errc() || end != label.data() + label.size()) {
      return Status::InvalidArgument(place + "label '" + label + "' is not an integer");
    }
    if (path.empty()) return Status::InvalidArgument(place + "expected 'PATH LABEL', no path");
    entries.push_back({std::move(path), value, number});
  }
  if (in.bad()) return Status::IOError(list_file + ": read error");
  if (entries.empty()) return Status::InvalidArgument(list_file + ": holds no images");
  return entries;
}

namespace {

// The Datum value for one image.
Result<std::string> MakeRecord(const ImageSetOptions& o, const ListEntry& entry,
                               const std::string& file, ImageSetConversion* summary, bool first) {
  std::string bytes;
  PSTRAIN_RETURN_IF_ERROR(ReadFileToString(file, &bytes));
  const ImageColor color = o.gray ? ImageColor::kGray : ImageColor::kColor;
  auto decoded = DecodeImage(bytes, color);
  if (!decoded.ok()) return decoded.status().WithContext(file);
  Image image = std::move(decoded).value();
  const bool resize = o.resize_height > 0;
  if (resize) image = ResizeImage(image, o.resize_height, o.resize_width);
  if (first) {
    summary->channels = image.channels;
    summary->height = image.height;
    summary->width = image.width;
  } else if (image.height != summary->height || image.width != summary->width) {
    summary->same_size = false;
    if (o.check_size) {
      return Status::InvalidArgument(
          file + ": size " + std::to_string(image.height) + " x " + std::to_string(image.width) +
          " differs from the first image's " + std::to_string(summary->height) + " x " +
          std::to_string(summary->width) + " (--check_size)");
    }
  }
  caffe::Datum datum;
  datum.set_label(entry.label);
  if (o.encoded) {
    const ImageFormat source = DetectImageFormat(bytes);
    const ImageFormat target = o.encode_type.empty() ? source : ParseImageFormat(o.encode_type);
    // The file itself when nothing changes it: its channel count is what a
    // native decode gives, so only keep it when that matches.
    PSTRAIN_ASSIGN_OR_RETURN(Image native, DecodeImage(bytes, ImageColor::kNative));
    if (!resize && target == source && native.channels == image.channels) {
      datum.set_data(bytes);
    } else {
      auto encoded = EncodeImage(image, target);
      if (!encoded.ok()) return encoded.status().WithContext(file);
      datum.set_data(encoded.value());
    }
    datum.set_encoded(true);
  } else {
    datum.set_channels(image.channels);
    datum.set_height(image.height);
    datum.set_width(image.width);
    datum.set_data(image.pixels.data(), image.pixels.size());
  }
  return datum.SerializeAsString();
}

}  // namespace

Result<ImageSetConversion> ConvertImageSet(const ImageSetOptions& o) {
  PSTRAIN_RETURN_IF_ERROR(CheckOptions(o));
  PSTRAIN_RETURN_IF_ERROR(CheckLmdbOutputFree(o.out));
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<ListEntry> entries, ReadImageList(o.list_file));
  if (o.shuffle) {
    std::mt19937_64 rng(o.seed);
    for (size_t i = entries.size(); i > 1; --i) {
      std::swap(entries[i - 1], entries[std::uniform_int_distribution<size_t>(0, i - 1)(rng)]);
    }
  }
  ImageSetConversion summary;
  PSTRAIN_ASSIGN_OR_RETURN(const DbBackend backend, ParseDbBackend(o.backend));
  PSTRAIN_RETURN_IF_ERROR(
      BuildRecordDb(o.out, backend, kImageSetMapSize, [&](RecordWriter& writer) {
        char index[32];
        for (size_t i = 0; i < entries.size(); ++i) {
          const ListEntry& entry = entries[i];
          const std::string file =
              o.root.empty() ? entry.path : (std::filesystem::path(o.root) / entry.path).string();
          auto value = MakeRecord(o, entry, file, &summary, i == 0);
          if (!value.ok()) {
            return value.status().WithContext(o.list_file + ":" + std::to_string(entry.line));
          }
          std::snprintf(index, sizeof(index), "%08zu", i);
          PSTRAIN_RETURN_IF_ERROR(writer.Put(std::string(index) + "_" + entry.path, value.value()));
          ++summary.records;
        }
        return Status::Ok();
      }));
  return summary;
}

Result<ImageMean> ComputeImageMean(const std::string& lmdb, const std::string& out) {
  PSTRAIN_ASSIGN_OR_RETURN(auto reader, LmdbReader::Open(lmdb));
  if (reader->count() == 0) return Status::InvalidArgument(lmdb + ": LMDB is empty");
  ImageMean mean;
  std::vector<double> sum;
  caffe::Datum datum;
  LmdbRecord record;
  for (int64_t i = 0; i < reader->count(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(reader->Next(&record));
    const std::string where = DescribeRecord(lmdb, record.index, record.key);
    PSTRAIN_RETURN_IF_ERROR(ParseDatum(record.value, where, &datum));
    if (i == 0) {
      mean.channels = datum.channels();
      mean.height = datum.height();
      mean.width = datum.width();
      sum.assign(static_cast<size_t>(mean.channels) * mean.height * mean.width, 0.0);
    } else if (datum.channels() != mean.channels || datum.height() != mean.height ||
               datum.width() != mean.width) {
      return Status::InvalidArgument(
          where + ": shape " + DatumShapeString(datum) + " differs from the first record's " +
          std::to_string(mean.channels) + " x " + std::to_string(mean.height) + " x " +
          std::to_string(mean.width) +
          " (a mean needs images of one size: convert with --resize_height/--resize_width)");
    }
    const std::string& bytes = datum.data();
    if (!bytes.empty()) {
      for (size_t k = 0; k < sum.size(); ++k) sum[k] += static_cast<uint8_t>(bytes[k]);
    } else {
      for (size_t k = 0; k < sum.size(); ++k) sum[k] += datum.float_data(static_cast<int>(k));
    }
  }
  mean.records = reader->count();
  caffe::BlobProto blob;
  blob.set_num(1);
  blob.set_channels(mean.channels);
  blob.set_height(mean.height);
  blob.set_width(mean.width);
  const size_t plane = static_cast<size_t>(mean.height) * mean.width;
  mean.channel_means.assign(static_cast<size_t>(mean.channels), 0.0);
  for (size_t k = 0; k < sum.size(); ++k) {
    const double value = sum[k] / static_cast<double>(mean.records);
    blob.add_data(static_cast<float>(value));
    mean.channel_means[k / plane] += value / static_cast<double>(plane);
  }
  PSTRAIN_RETURN_IF_ERROR(WriteBinaryProto(blob, out));
  return mean;
}

}  // namespace pstrain

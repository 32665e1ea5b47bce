// Caffe Datum records: parsing and validation.
//
// A Datum holds one C x H x W image as raw bytes (`data`, uint8) or floats
// (`float_data`), plus a label. Encoded (JPEG/PNG) records are refused: PSTrain
// reads only raw records (convert_mnist_data, convert_imageset without
// --encoded, or ps-data).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.hpp"
#include "proto/caffe.pb.h"

namespace pstrain {

// Names a record in messages: "<path>: record <index> (key '<key>')", with
// non-printable key bytes shown as \xNN.
std::string DescribeRecord(const std::string& path, int64_t index, std::string_view key);

// Parses and validates `value`. Errors, each prefixed with `where` (usually
// DescribeRecord(...)):
//   "not a valid Datum (corrupt protobuf)"
//   "encoded (JPEG/PNG) Datum records are not supported"
//   "invalid Datum shape C x H x W"                 (a non-positive dimension)
//   "invalid Datum shape C x H x W (more than 2147483647 values)"
//   "channels*height*width = N but the record has M data bytes"
//   "channels*height*width = N but the record has M float_data values"
//   "the record has no pixel data"
Status ParseDatum(std::string_view value, const std::string& where, caffe::Datum* datum);

// "C x H x W" of a datum.
std::string DatumShapeString(const caffe::Datum& datum);

}  // namespace pstrain

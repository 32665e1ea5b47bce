// Caffe Datum records: parsing and validation.
//
// A Datum holds one C x H x W image as raw bytes (`data`, uint8) or floats
// (`float_data`), plus a label; or, with `encoded` set, a PNG or JPEG file in
// `data` (Caffe's convert_imageset --encoded, ps-data images --encoded), whose
// shape fields Caffe leaves unset. ParseDatum decodes encoded records into
// raw ones (B, G, R planar, as Caffe's OpenCV decoding gives), so everything
// after it sees raw records only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.hpp"
#include "proto/caffe.pb.h"
#include "worker/data/image_codec.hpp"

namespace pstrain {

// Names a record in messages: "<path>: record <index> (key '<key>')", with
// non-printable key bytes shown as \xNN.
std::string DescribeRecord(const std::string& path, int64_t index, std::string_view key);

// Parses and validates `value`; decodes an encoded record with `color`
// (transform_param's force_color / force_gray; kNative keeps the image's own
// channel count) and leaves `datum` raw: data = the pixels, encoded = false,
// channels/height/width = the decoded image's. Errors, each prefixed with
// `where` (usually DescribeRecord(...)):
//   "not a valid Datum (corrupt protobuf)"
//   "encoded record: <DecodeImage's error>"
//   "invalid Datum shape C x H x W"                 (a non-positive dimension)
//   "invalid Datum shape C x H x W (more than 2147483647 values)"
//   "channels*height*width = N but the record has M data bytes"
//   "channels*height*width = N but the record has M float_data values"
//   "the record has no pixel data"
Status ParseDatum(std::string_view value, const std::string& where, caffe::Datum* datum,
                  ImageColor color = ImageColor::kNative);

// transform_param's force_color / force_gray as an ImageColor. Error: both set.
Result<ImageColor> DecodeColorOf(const caffe::TransformationParameter& param);

// "C x H x W" of a datum.
std::string DatumShapeString(const caffe::Datum& datum);

}  // namespace pstrain

#include "worker/data/datum.hpp"

#include <cstdint>
#include <cstdio>

namespace pstrain {

std::string DescribeRecord(const std::string& path, int64_t index, std::string_view key) {
  std::string shown;
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      shown += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      shown += hex;
    }
  }
  return path + ": record " + std::to_string(index) + " (key '" + shown + "')";
}

std::string DatumShapeString(const caffe::Datum& datum) {
  return std::to_string(datum.channels()) + " x " + std::to_string(datum.height()) + " x " +
         std::to_string(datum.width());
}

Result<ImageColor> DecodeColorOf(const caffe::TransformationParameter& param) {
  if (param.force_color() && param.force_gray()) {
    return Status::InvalidArgument("transform_param: cannot give both force_color and force_gray");
  }
  if (param.force_color()) return ImageColor::kColor;
  if (param.force_gray()) return ImageColor::kGray;
  return ImageColor::kNative;
}

Status ParseDatum(std::string_view value, const std::string& where, caffe::Datum* datum,
                  ImageColor color) {
  auto fail = [&](const std::string& what) { return Status::Corruption(where + ": " + what); };
  if (value.size() > static_cast<size_t>(INT32_MAX) ||
      !datum->ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return fail("not a valid Datum (corrupt protobuf)");
  }
  if (datum->encoded()) {
    auto image = DecodeImage(datum->data(), color);
    if (!image.ok()) return fail("encoded record: " + image.status().message());
    datum->set_channels(image.value().channels);
    datum->set_height(image.value().height);
    datum->set_width(image.value().width);
    const auto& pixels = image.value().pixels;
    datum->set_data(pixels.data(), pixels.size());
    datum->set_encoded(false);
    return Status::Ok();
  }
  if (datum->channels() <= 0 || datum->height() <= 0 || datum->width() <= 0) {
    return fail("invalid Datum shape " + DatumShapeString(*datum));
  }
  // No record holds more than INT32_MAX bytes or values (checked above), and
  // the product of three ints could overflow even int64.
  const int64_t channels_height = int64_t{datum->channels()} * int64_t{datum->height()};
  if (channels_height > INT32_MAX / datum->width()) {
    return fail("invalid Datum shape " + DatumShapeString(*datum) + " (more than " +
                std::to_string(INT32_MAX) + " values)");
  }
  const int64_t expected = channels_height * int64_t{datum->width()};
  const std::string product = "channels*height*width = " + std::to_string(expected);
  if (!datum->data().empty()) {
    if (static_cast<int64_t>(datum->data().size()) != expected) {
      return fail(product + " but the record has " + std::to_string(datum->data().size()) +
                  " data bytes");
    }
    return Status::Ok();
  }
  if (datum->float_data_size() > 0) {
    if (datum->float_data_size() != expected) {
      return fail(product + " but the record has " + std::to_string(datum->float_data_size()) +
                  " float_data values");
    }
    return Status::Ok();
  }
  return fail("the record has no pixel data");
}

}  // namespace pstrain

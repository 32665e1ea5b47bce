// Fuzz target "datum": one LMDB record value through ParseDatum and, when it
// is accepted, through a DataTransformer made for its shape (crop, mirror,
// mean and scale chosen by the first input byte), as the Data layer does.
//
// Input: byte 0 = transform set-up (bit 0 mirror, bit 1 TEST phase, bits 2-3
// crop size 0..3, bit 4 one mean_value, bit 5 a mean_value per channel up to
// 3), the rest is the record. Property: a record ParseDatum accepts is one the
// transformer reads within bounds (ASan checks the reads); output is finite
// for uint8 pixels.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/rng.hpp"
#include "fuzz/fuzz_util.hpp"
#include "worker/data/datum.hpp"
#include "worker/data/transform.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t setup = data[0];
  std::string_view record(reinterpret_cast<const char*>(data + 1), size - 1);
  caffe::Datum datum;
  if (!pstrain::ParseDatum(record, "fuzz: record 0", &datum).ok()) return 0;
  (void)pstrain::DatumShapeString(datum);

  caffe::TransformationParameter param;
  param.set_mirror(setup & 1);
  param.set_crop_size((setup >> 2) & 3);
  param.set_scale(0.5f);
  if (setup & 16) param.add_mean_value(10.f);
  if (setup & 32) {
    for (int c = 0; c < datum.channels() && c < 3; ++c) param.add_mean_value(1.f + c);
  }
  const caffe::Phase phase = (setup & 2) ? caffe::TEST : caffe::TRAIN;
  auto transformer = pstrain::DataTransformer::Create(param, phase, datum.channels(),
                                                      datum.height(), datum.width());
  if (!transformer.ok()) return 0;
  std::vector<float> out(static_cast<size_t>(transformer.value().output_count()));
  pstrain::Rng rng(7);
  transformer.value().Transform(datum, &rng, out.data());
  if (!datum.data().empty()) {
    for (float v : out) {
      if (!std::isfinite(v))
        pstrain::fuzz::Fail("fuzz_datum", "non-finite output of a uint8 image");
    }
  }
  return 0;
}

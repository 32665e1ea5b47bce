#include "worker/filler.hpp"

#include <cmath>

namespace pstrain {
namespace {

// Caffe's fan-in and fan-out of a weight blob (num_output first).
float FanScale(const caffe::FillerParameter& filler, const Blob& blob) {
  const float fan_in = static_cast<float>(blob.count() / blob.shape(0));
  const float fan_out =
      static_cast<float>(blob.num_axes() > 1 ? blob.count() / blob.shape(1) : blob.count());
  switch (filler.variance_norm()) {
    case caffe::FillerParameter::AVERAGE:
      return (fan_in + fan_out) / 2.f;
    case caffe::FillerParameter::FAN_OUT:
      return fan_out;
    default:
      return fan_in;
  }
}

}  // namespace

Status ValidateFiller(const caffe::FillerParameter& filler, const Blob& blob, int64_t max_values) {
  if (blob.count() > max_values) {
    return Status::Error("a blob of shape " + blob.shape_string() +
                         " is larger than the limit of " + std::to_string(max_values) + " values");
  }
  const std::string& type = filler.type();
  if (type == "constant" || type == "uniform" || type == "positive_unitball") {
    if (type == "uniform" && !(filler.min() <= filler.max())) {
      return Status::Error("uniform filler needs min <= max");
    }
    return Status::Ok();
  }
  if (type == "gaussian") {
    if (filler.std() < 0) return Status::Error("gaussian filler needs std >= 0");
    if (filler.sparse() >= 0 && blob.num_axes() < 1) {
      return Status::Error("sparse gaussian filler needs a blob with at least one axis");
    }
    return Status::Ok();
  }
  if (type == "xavier" || type == "msra") {
    if (blob.num_axes() < 1 || blob.shape(0) == 0 || blob.count() == 0) {
      return Status::Error(type + " filler needs a non-empty blob");
    }
    return Status::Ok();
  }
  if (type == "bilinear") {
    if (blob.num_axes() != 4 || blob.shape(2) != blob.shape(3)) {
      return Status::Error("bilinear filler needs a 4-D blob with square kernels, got " +
                           blob.shape_string());
    }
    return Status::Ok();
  }
  return Status::Error("unknown filler type '" + type +
                       "' (known: constant, uniform, gaussian, xavier, msra, positive_unitball, "
                       "bilinear)");
}

void Fill(const caffe::FillerParameter& filler, Rng& rng, Blob* blob) {
  const int64_t n = blob->count();
  float* data = blob->mutable_cpu_data();
  const std::string& type = filler.type();
  if (type == "constant") {
    for (int64_t i = 0; i < n; ++i) data[i] = filler.value();
  } else if (type == "uniform") {
    for (int64_t i = 0; i < n; ++i) data[i] = rng.Uniform(filler.min(), filler.max());
  } else if (type == "gaussian") {
    for (int64_t i = 0; i < n; ++i) data[i] = rng.Gaussian(filler.mean(), filler.std());
    if (filler.sparse() >= 0) {
      const float keep = static_cast<float>(filler.sparse()) / static_cast<float>(blob->shape(0));
      for (int64_t i = 0; i < n; ++i) {
        if (!rng.Bernoulli(std::min(1.f, keep))) data[i] = 0.f;
      }
    }
  } else if (type == "positive_unitball") {
    for (int64_t i = 0; i < n; ++i) data[i] = rng.Uniform(0.f, 1.f);
    const int num = blob->num_axes() > 0 ? blob->shape(0) : 1;
    const int64_t dim = num > 0 ? n / num : 0;
    for (int r = 0; r < num; ++r) {
      double sum = 0;
      for (int64_t j = 0; j < dim; ++j) sum += data[r * dim + j];
      for (int64_t j = 0; j < dim; ++j)
        data[r * dim + j] = static_cast<float>(data[r * dim + j] / sum);
    }
  } else if (type == "xavier") {
    const float scale = std::sqrt(3.f / FanScale(filler, *blob));
    for (int64_t i = 0; i < n; ++i) data[i] = rng.Uniform(-scale, scale);
  } else if (type == "msra") {
    const float stddev = std::sqrt(2.f / FanScale(filler, *blob));
    for (int64_t i = 0; i < n; ++i) data[i] = rng.Gaussian(0.f, stddev);
  } else if (type == "bilinear") {
    const int width = blob->shape(3);
    const int height = blob->shape(2);
    const float f = std::ceil(width / 2.f);
    const float c = (2 * f - 1 - static_cast<int>(f) % 2) / (2.f * f);
    for (int64_t i = 0; i < n; ++i) {
      const float x = static_cast<float>(i % width);
      const float y = static_cast<float>((i / width) % height);
      data[i] = (1 - std::fabs(x / f - c)) * (1 - std::fabs(y / f - c));
    }
  } else {
    PSTRAIN_CHECK_MSG(false, "Fill called with unvalidated filler type " + type);
  }
}

}  // namespace pstrain

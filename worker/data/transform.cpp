#include "worker/data/transform.hpp"

#include "common/blob.hpp"
#include "common/proto_io.hpp"

namespace pstrain {

namespace {

std::string Shape3(int c, int h, int w) {
  return std::to_string(c) + " x " + std::to_string(h) + " x " + std::to_string(w);
}

}  // namespace

Result<DataTransformer> DataTransformer::Create(const caffe::TransformationParameter& param,
                                                caffe::Phase phase, int channels, int height,
                                                int width) {
  DataTransformer t;
  t.phase_ = phase;
  t.scale_ = param.scale();
  t.mirror_ = param.mirror();
  t.channels_ = channels;
  t.height_ = height;
  t.width_ = width;
  t.out_height_ = height;
  t.out_width_ = width;
  const std::string data_shape = Shape3(channels, height, width);
  if (param.has_mean_file() && param.mean_value_size() > 0) {
    return Status::Error("transform_param: cannot give both mean_file and mean_value");
  }
  if (param.mean_value_size() > 0) {
    if (param.mean_value_size() != 1 && param.mean_value_size() != channels) {
      return Status::Error("transform_param: mean_value has " +
                           std::to_string(param.mean_value_size()) + " values; the data has " +
                           std::to_string(channels) +
                           " channels (give one value or one per channel)");
    }
    for (int c = 0; c < channels; ++c) {
      t.mean_channel_.push_back(param.mean_value(param.mean_value_size() == 1 ? 0 : c));
    }
  }
  if (param.has_mean_file()) {
    caffe::BlobProto proto;
    PSTRAIN_RETURN_IF_ERROR(ReadBinaryProto(param.mean_file(), &proto));
    Blob mean;
    PSTRAIN_RETURN_IF_ERROR(mean.FromProto(proto, /*reshape=*/true).WithContext(param.mean_file()));
    // Accepts 1 x C x H x W, or C x H x W (left-padded with 1s).
    std::vector<int> padded = mean.shape();
    if (padded.size() < 4) padded.insert(padded.begin(), 4 - padded.size(), 1);
    if (padded != std::vector<int>{1, channels, height, width}) {
      return Status::Error(param.mean_file() + ": mean has shape " + mean.shape_string() +
                           "; the data is " + data_shape + " (expected 1 x " + data_shape + ")");
    }
    t.mean_image_.assign(mean.cpu_data(), mean.cpu_data() + mean.count());
  }
  if (param.crop_size() > 0) {
    const int crop = static_cast<int>(param.crop_size());
    if (param.crop_size() > static_cast<uint32_t>(INT32_MAX) || crop > height || crop > width) {
      return Status::Error("transform_param: crop_size " + std::to_string(param.crop_size()) +
                           " is larger than the data (" + data_shape + ")");
    }
    t.crop_size_ = crop;
    t.out_height_ = crop;
    t.out_width_ = crop;
  }
  return t;
}

std::vector<int> DataTransformer::OutputShape(int num) const {
  return {num, channels_, out_height_, out_width_};
}

bool DataTransformer::NeedsRandom() const {
  return mirror_ || (crop_size_ > 0 && phase_ == caffe::TRAIN);
}

void DataTransformer::Transform(const caffe::Datum& datum, Rng* rng, float* out) const {
  const bool do_mirror = mirror_ && rng->Below(2) == 1;
  int h_off = 0;
  int w_off = 0;
  if (crop_size_ > 0) {
    if (phase_ == caffe::TRAIN) {
      h_off = static_cast<int>(rng->Below(static_cast<uint32_t>(height_ - crop_size_ + 1)));
      w_off = static_cast<int>(rng->Below(static_cast<uint32_t>(width_ - crop_size_ + 1)));
    } else {
      h_off = (height_ - crop_size_) / 2;
      w_off = (width_ - crop_size_) / 2;
    }
  }
  const std::string& bytes = datum.data();
  const bool use_bytes = !bytes.empty();
  const bool has_image_mean = !mean_image_.empty();
  const bool has_channel_mean = !mean_channel_.empty();
  for (int c = 0; c < channels_; ++c) {
    const float channel_mean = has_channel_mean ? mean_channel_[c] : 0.f;
    for (int h = 0; h < out_height_; ++h) {
      const int64_t in_row = (int64_t{c} * height_ + h_off + h) * width_ + w_off;
      float* out_row = out + (int64_t{c} * out_height_ + h) * out_width_;
      for (int w = 0; w < out_width_; ++w) {
        const int64_t in = in_row + w;
        const float pixel = use_bytes ? static_cast<float>(static_cast<uint8_t>(bytes[in]))
                                      : datum.float_data(static_cast<int>(in));
        const float mean = has_image_mean ? mean_image_[in] : channel_mean;
        out_row[do_mirror ? out_width_ - 1 - w : w] = (pixel - mean) * scale_;
      }
    }
  }
}

}  // namespace pstrain

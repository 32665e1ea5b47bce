#include "worker/layers/image_data_layer.hpp"

#include <functional>

#include "common/proto_io.hpp"
#include "worker/data/sample_order.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status ImageDataLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& /*top*/) {
  const caffe::ImageDataParameter& p = param_.image_data_param();
  if (p.source().empty()) return Status::InvalidArgument("image_data_param.source must be given");
  if (p.batch_size() == 0 || p.batch_size() > static_cast<uint32_t>(INT32_MAX)) {
    return Status::InvalidArgument("image_data_param.batch_size must be in [1, 2147483647], got " +
                                   std::to_string(p.batch_size()));
  }
  if ((p.new_height() > 0) != (p.new_width() > 0) || p.new_height() > 1u << 16 ||
      p.new_width() > 1u << 16) {
    return Status::InvalidArgument(
        "image_data_param.new_height and new_width go together (both > 0 to resize, up to 65536, "
        "both 0 not to); got " +
        std::to_string(p.new_height()) + " and " + std::to_string(p.new_width()));
  }
  if (context().world_size < 1 || context().rank < 0 || context().rank >= context().world_size) {
    return Status::Error("bad worker rank " + std::to_string(context().rank) + " of " +
                         std::to_string(context().world_size));
  }
  if (context().start_iter < 0) return Status::Error("start_iter must be >= 0");
  batch_size_ = static_cast<int>(p.batch_size());
  new_height_ = static_cast<int>(p.new_height());
  new_width_ = static_cast<int>(p.new_width());
  color_ = p.is_color() ? ImageColor::kColor : ImageColor::kGray;
  shuffle_ = p.shuffle();
  root_ = p.root_folder();
  list_ = p.source();
  seed_ = MixSeed(context().seed, std::hash<std::string>{}(name()));
  PSTRAIN_ASSIGN_OR_RETURN(lines_, ReadImageList(p.source()));
  skip_ = 0;
  if (p.rand_skip() > 0) {
    Rng rng(MixSeed(seed_, 0x736b6970));  // "skip"
    skip_ = rng.Below(p.rand_skip());
    if (skip_ >= line_count()) {
      return Status::InvalidArgument("image_data_param.rand_skip drew " + std::to_string(skip_) +
                                     " lines to skip, but " + p.source() + " has only " +
                                     std::to_string(line_count()));
    }
  }
  ordered_epoch_ = -1;
  shape_.clear();
  PSTRAIN_RETURN_IF_ERROR(Load(LineAt(0)));
  shape_ = {datum_.channels(), datum_.height(), datum_.width()};

  caffe::TransformationParameter transform = param_.transform_param();
  if (p.has_scale() && !transform.has_scale()) transform.set_scale(p.scale());
  if (p.has_mean_file() && !transform.has_mean_file()) transform.set_mean_file(p.mean_file());
  if (p.has_crop_size() && !transform.has_crop_size()) transform.set_crop_size(p.crop_size());
  if (p.has_mirror() && !transform.has_mirror()) transform.set_mirror(p.mirror());
  if (transform.force_color() || transform.force_gray()) {
    return Status::InvalidArgument(
        "transform_param.force_color / force_gray apply to encoded Data records; ImageData "
        "takes image_data_param.is_color");
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      DataTransformer transformer,
      DataTransformer::Create(transform, phase(), shape_[0], shape_[1], shape_[2]));
  transformer_ = std::make_unique<DataTransformer>(std::move(transformer));
  StartStream();
  return Status::Ok();
}

Status ImageDataLayer::Reshape(const BlobVec& /*bottom*/, const BlobVec& top) {
  top[0]->Reshape(transformer_->OutputShape(batch_size_));
  if (top.size() > 1) top[1]->Reshape({batch_size_});
  return Status::Ok();
}

const ListEntry& ImageDataLayer::LineAt(int64_t p) {
  const int64_t n = line_count();
  const int64_t q = p + skip_;
  const int64_t epoch = q / n;
  if (ordered_epoch_ != epoch) {
    if (shuffle_) {
      order_ = SeededPermutation(n, MixSeed(seed_, static_cast<uint64_t>(epoch)));
    } else {
      order_.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) order_[static_cast<size_t>(i)] = i;
    }
    ordered_epoch_ = epoch;
  }
  return lines_[static_cast<size_t>(order_[static_cast<size_t>(q % n)])];
}

Status ImageDataLayer::Load(const ListEntry& entry) {
  const std::string file = root_ + entry.path;
  const std::string where = list_ + ":" + std::to_string(entry.line) + ": " + file;
  std::string bytes;
  Status read = ReadFileToString(file, &bytes);
  if (!read.ok()) return read.WithContext(list_ + ":" + std::to_string(entry.line));
  auto decoded = DecodeImage(bytes, color_);
  if (!decoded.ok()) return decoded.status().WithContext(where);
  Image image = std::move(decoded).value();
  if (new_height_ > 0) image = ResizeImage(image, new_height_, new_width_);
  if (!shape_.empty() &&
      (image.channels != shape_[0] || image.height != shape_[1] || image.width != shape_[2])) {
    return Status::InvalidArgument(
        where + ": size " + std::to_string(image.height) + " x " + std::to_string(image.width) +
        " differs from the first image's " + std::to_string(shape_[1]) + " x " +
        std::to_string(shape_[2]) + " (set image_data_param new_height and new_width)");
  }
  datum_.Clear();
  datum_.set_channels(image.channels);
  datum_.set_height(image.height);
  datum_.set_width(image.width);
  datum_.set_label(entry.label);
  datum_.set_data(image.pixels.data(), image.pixels.size());
  return Status::Ok();
}

Status ImageDataLayer::ReadBatch(int64_t t, const BlobVec& top) {
  const int64_t first = (t * context().world_size + context().rank) * int64_t{batch_size_};
  const int64_t per_item = transformer_->output_count();
  const bool random = transformer_->NeedsRandom();
  float* data = top[0]->mutable_cpu_data();
  for (int n = 0; n < batch_size_; ++n) {
    const int64_t p = first + n;
    const ListEntry& entry = LineAt(p);
    PSTRAIN_RETURN_IF_ERROR(Load(entry));
    if (random) {
      Rng rng(MixSeed(seed_, static_cast<uint64_t>(p)));
      transformer_->Transform(datum_, &rng, data + n * per_item);
    } else {
      transformer_->Transform(datum_, nullptr, data + n * per_item);
    }
    if (top.size() > 1) top[1]->mutable_cpu_data()[n] = static_cast<float>(entry.label);
  }
  set_delivered_first(first);
  return Status::Ok();
}

PSTRAIN_REGISTER_LAYER("ImageData", ImageDataLayer);

}  // namespace pstrain

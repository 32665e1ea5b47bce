#include "worker/layers/window_data_layer.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>

#include "common/blob.hpp"
#include "common/proto_io.hpp"
#include "common/rng.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

constexpr uint64_t kBackgroundStream = 0x6267;  // "bg"
constexpr uint64_t kForegroundStream = 0x6667;  // "fg"

// The window file's whitespace-separated tokens with their line numbers.
class Tokens {
 public:
  Tokens(std::string text, std::string file) : text_(std::move(text)), file_(std::move(file)) {}

  // False at the end of the file.
  bool Next(std::string* token) {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) {
      if (text_[pos_] == '\n') ++line_;
      ++pos_;
    }
    if (pos_ >= text_.size()) return false;
    token_line_ = line_;
    const size_t start = pos_;
    while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    token->assign(text_, start, pos_ - start);
    return true;
  }
  // The line of the last token read (at the end of the file: the last one's).
  int line() const { return token_line_; }
  std::string Where() const { return file_ + ":" + std::to_string(token_line_); }
  Status Error(const std::string& what) const {
    return Status::InvalidArgument(Where() + ": " + what);
  }

  // The next token as an int (or float) named `what`.
  template <typename T>
  Status Read(const std::string& what, T* value) {
    std::string token;
    if (!Next(&token)) return Error("expected " + what + ", got the end of the file");
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), *value);
    if (ec != std::errc() || end != token.data() + token.size()) {
      return Error(what + " '" + token + "' is not a" +
                   (std::is_integral_v<T> ? "n integer" : " number"));
    }
    return Status::Ok();
  }

 private:
  std::string text_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1;
  int token_line_ = 1;
};

std::string Box(int x1, int y1, int x2, int y2) {
  return "(x1 y1 x2 y2) = (" + std::to_string(x1) + " " + std::to_string(y1) + " " +
         std::to_string(x2) + " " + std::to_string(y2) + ")";
}

}  // namespace

Status WindowDataLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& /*top*/) {
  const caffe::WindowDataParameter& p = param_.window_data_param();
  const caffe::TransformationParameter& t = param_.transform_param();
  if (p.source().empty()) return Status::InvalidArgument("window_data_param.source must be given");
  if (p.batch_size() == 0 || p.batch_size() > static_cast<uint32_t>(INT32_MAX)) {
    return Status::InvalidArgument("window_data_param.batch_size must be in [1, 2147483647], got " +
                                   std::to_string(p.batch_size()));
  }
  const uint32_t crop = t.has_crop_size() ? t.crop_size() : p.crop_size();
  if (crop == 0 || crop > 1u << 16) {
    return Status::InvalidArgument(
        "WindowData needs transform_param.crop_size (or window_data_param.crop_size) in [1, "
        "65536], got " +
        std::to_string(crop));
  }
  if (p.context_pad() > 0 && 2 * uint64_t{p.context_pad()} >= crop) {
    return Status::InvalidArgument("window_data_param.context_pad " +
                                   std::to_string(p.context_pad()) + " leaves no window in crop " +
                                   std::to_string(crop) + " (2 * context_pad must be below it)");
  }
  if (p.crop_mode() != "warp" && p.crop_mode() != "square") {
    return Status::InvalidArgument("window_data_param.crop_mode '" + p.crop_mode() +
                                   "': expected warp or square");
  }
  if (!(p.fg_fraction() >= 0.f && p.fg_fraction() <= 1.f)) {
    return Status::InvalidArgument("window_data_param.fg_fraction must be in [0, 1], got " +
                                   std::to_string(p.fg_fraction()));
  }
  if (t.force_color() || t.force_gray()) {
    return Status::InvalidArgument(
        "transform_param.force_color / force_gray apply to encoded Data records; WindowData reads "
        "every image as colour");
  }
  if (context().world_size < 1 || context().rank < 0 || context().rank >= context().world_size) {
    return Status::Error("bad worker rank " + std::to_string(context().rank) + " of " +
                         std::to_string(context().world_size));
  }
  if (context().start_iter < 0) return Status::Error("start_iter must be >= 0");
  batch_size_ = static_cast<int>(p.batch_size());
  num_fg_ = static_cast<int>(static_cast<float>(batch_size_) * p.fg_fraction());
  crop_ = static_cast<int>(crop);
  context_pad_ = static_cast<int>(p.context_pad());
  square_ = p.crop_mode() == "square";
  mirror_ = t.has_mirror() ? t.mirror() : p.mirror();
  scale_ = t.has_scale() ? t.scale() : p.scale();
  source_ = p.source();
  seed_ = MixSeed(context().seed, std::hash<std::string>{}(name()));

  // The mean.
  const std::string mean_file = t.has_mean_file() ? t.mean_file() : p.mean_file();
  mean_image_.clear();
  mean_channel_.clear();
  if (!mean_file.empty() && t.mean_value_size() > 0) {
    return Status::InvalidArgument("transform_param: cannot give both mean_file and mean_value");
  }
  if (t.mean_value_size() > 0) {
    if (t.mean_value_size() != 1 && t.mean_value_size() != 3) {
      return Status::InvalidArgument("transform_param: mean_value has " +
                                     std::to_string(t.mean_value_size()) +
                                     " values; WindowData's images have 3 channels (give 1 or 3)");
    }
    for (int c = 0; c < 3; ++c) mean_channel_.push_back(t.mean_value(t.mean_value_size() == 1 ? 0 : c));
  }
  if (!mean_file.empty()) {
    caffe::BlobProto proto;
    PSTRAIN_RETURN_IF_ERROR(ReadBinaryProto(mean_file, &proto));
    Blob mean;
    PSTRAIN_RETURN_IF_ERROR(mean.FromProto(proto, /*reshape=*/true).WithContext(mean_file));
    std::vector<int> padded = mean.shape();
    if (padded.size() < 4) padded.insert(padded.begin(), 4 - padded.size(), 1);
    const bool fits = padded.size() == 4 && padded[0] == 1 && padded[1] == 3 &&
                      padded[3] >= crop_ && (padded[3] - crop_) / 2 + crop_ <= padded[2];
    if (!fits) {
      return Status::InvalidArgument(
          mean_file + ": mean has shape " + mean.shape_string() +
          "; WindowData needs 1 x 3 x H x W with W >= crop_size " + std::to_string(crop_) +
          " and H >= (W - crop_size) / 2 + crop_size (the crop is read at offset (W - "
          "crop_size) / 2 on both axes)");
    }
    mean_height_ = padded[2];
    mean_width_ = padded[3];
    mean_off_ = (mean_width_ - crop_) / 2;
    mean_image_.assign(mean.cpu_data(), mean.cpu_data() + mean.count());
  }

  PSTRAIN_RETURN_IF_ERROR(ReadWindowFile(p.source(), p.root_folder()));
  if (batch_size_ - num_fg_ > 0 && bg_.empty()) {
    return Status::InvalidArgument(
        source_ + ": no background windows (overlap < bg_threshold " +
        std::to_string(p.bg_threshold()) + "), but each batch takes " +
        std::to_string(batch_size_ - num_fg_));
  }
  if (num_fg_ > 0 && fg_.empty()) {
    return Status::InvalidArgument(
        source_ + ": no foreground windows (overlap >= fg_threshold " +
        std::to_string(p.fg_threshold()) + "), but each batch takes " + std::to_string(num_fg_));
  }
  StartStream();
  return Status::Ok();
}

Status WindowDataLayer::ReadWindowFile(const std::string& file, const std::string& root) {
  const caffe::WindowDataParameter& p = param_.window_data_param();
  std::string text;
  Status read = ReadFileToString(file, &text);
  if (!read.ok()) return read.WithContext("window_data_param.source");
  Tokens in(std::move(text), file);
  images_.clear();
  cache_.clear();
  fg_.clear();
  bg_.clear();
  std::string token;
  while (in.Next(&token)) {
    if (token != "#") return in.Error("expected '#' to start an image block, got '" + token + "'");
    int index = 0;
    PSTRAIN_RETURN_IF_ERROR(in.Read("image index", &index));
    if (index != static_cast<int>(images_.size())) {
      return in.Error("image index " + std::to_string(index) + ", expected " +
                      std::to_string(images_.size()) + " (images are numbered 0, 1, ... in order)");
    }
    WindowImage image;
    if (!in.Next(&token)) return in.Error("expected the image's path, got the end of the file");
    image.path = root + token;
    image.line = in.line();
    int channels = 0;
    PSTRAIN_RETURN_IF_ERROR(in.Read("channels", &channels));
    if (channels != 3) {
      return in.Error("channels " + std::to_string(channels) +
                      ": WindowData reads every image as 3 channels (B, G, R), as Caffe");
    }
    PSTRAIN_RETURN_IF_ERROR(in.Read("height", &image.height));
    PSTRAIN_RETURN_IF_ERROR(in.Read("width", &image.width));
    if (image.height < 1 || image.width < 1) {
      return in.Error("image size " + std::to_string(image.height) + " x " +
                      std::to_string(image.width) + " (height x width) must be positive");
    }
    // The image itself, decoded once: it must read and have the size given.
    auto decoded = LoadImage(image);
    if (!decoded.ok()) {
      return decoded.status().WithContext(file + ":" + std::to_string(image.line));
    }
    if (decoded.value().height != image.height || decoded.value().width != image.width) {
      return Status::InvalidArgument(
          file + ":" + std::to_string(image.line) + ": " + image.path + ": image is " +
          std::to_string(decoded.value().height) + " x " + std::to_string(decoded.value().width) +
          " but the window file says " + std::to_string(image.height) + " x " +
          std::to_string(image.width) + " (height x width)");
    }
    if (p.cache_images()) cache_.push_back(std::move(decoded).value());
    int count = 0;
    PSTRAIN_RETURN_IF_ERROR(in.Read("num_windows", &count));
    if (count < 0) return in.Error("num_windows " + std::to_string(count) + " is negative");
    for (int i = 0; i < count; ++i) {
      Window w;
      w.image = index;
      PSTRAIN_RETURN_IF_ERROR(in.Read("class_index", &w.label));
      PSTRAIN_RETURN_IF_ERROR(in.Read("overlap", &w.overlap));
      PSTRAIN_RETURN_IF_ERROR(in.Read("x1", &w.x1));
      PSTRAIN_RETURN_IF_ERROR(in.Read("y1", &w.y1));
      PSTRAIN_RETURN_IF_ERROR(in.Read("x2", &w.x2));
      PSTRAIN_RETURN_IF_ERROR(in.Read("y2", &w.y2));
      if (w.x1 < 0 || w.y1 < 0 || w.x1 > w.x2 || w.y1 > w.y2 || w.x2 >= image.width ||
          w.y2 >= image.height) {
        return in.Error("window " + Box(w.x1, w.y1, w.x2, w.y2) + " is not inside the " +
                        std::to_string(image.height) + " x " + std::to_string(image.width) +
                        " (height x width) image " + image.path +
                        " (corners are inclusive pixel indices from 0)");
      }
      if (w.overlap >= p.fg_threshold()) {
        if (w.label <= 0) {
          return in.Error("foreground window (overlap " + std::to_string(w.overlap) +
                          " >= fg_threshold) has class_index " + std::to_string(w.label) +
                          "; foreground classes are > 0 (0 is background)");
        }
        fg_.push_back(w);
      } else if (w.overlap < p.bg_threshold()) {
        w.label = 0;
        w.overlap = 0;
        bg_.push_back(w);
      }
    }
    images_.push_back(std::move(image));
  }
  if (images_.empty()) return Status::InvalidArgument(file + ": holds no images");
  return Status::Ok();
}

Result<Image> WindowDataLayer::LoadImage(const WindowImage& image) const {
  std::string bytes;
  PSTRAIN_RETURN_IF_ERROR(ReadFileToString(image.path, &bytes));
  auto decoded = DecodeImage(bytes, ImageColor::kColor);
  if (!decoded.ok()) return decoded.status().WithContext(image.path);
  return decoded;
}

Status WindowDataLayer::Reshape(const BlobVec& /*bottom*/, const BlobVec& top) {
  top[0]->Reshape({batch_size_, 3, crop_, crop_});
  if (top.size() > 1) top[1]->Reshape({batch_size_});
  return Status::Ok();
}

void WindowDataLayer::CropWindow(const Image& image, const Window& window, bool mirror,
                                 float* out) const {
  int x1 = window.x1, y1 = window.y1, x2 = window.x2, y2 = window.y2;
  int out_h = crop_, out_w = crop_;
  int pad_h = 0, pad_w = 0;
  if (context_pad_ > 0 || square_) {
    // Caffe's arithmetic, in float: widen about the centre so that, warped to
    // the crop, context_pad pixels of context lie on each side.
    const float crop = static_cast<float>(crop_);
    const float context_scale = crop / static_cast<float>(crop_ - 2 * context_pad_);
    float half_h = static_cast<float>(y2 - y1 + 1) / 2.f;
    float half_w = static_cast<float>(x2 - x1 + 1) / 2.f;
    const float center_x = static_cast<float>(x1) + half_w;
    const float center_y = static_cast<float>(y1) + half_h;
    if (square_) half_h = half_w = std::max(half_h, half_w);
    x1 = static_cast<int>(std::round(center_x - half_w * context_scale));
    x2 = static_cast<int>(std::round(center_x + half_w * context_scale));
    y1 = static_cast<int>(std::round(center_y - half_h * context_scale));
    y2 = static_cast<int>(std::round(center_y + half_h * context_scale));
    // Clip to the image, keeping what lies outside as padding.
    const int unclipped_h = y2 - y1 + 1;
    const int unclipped_w = x2 - x1 + 1;
    int pad_x1 = std::max(0, -x1);
    int pad_y1 = std::max(0, -y1);
    int pad_x2 = std::max(0, x2 - image.width + 1);
    const int pad_y2 = std::max(0, y2 - image.height + 1);
    x1 += pad_x1;
    x2 -= pad_x2;
    y1 += pad_y1;
    y2 -= pad_y2;
    const float scale_x = crop / static_cast<float>(unclipped_w);
    const float scale_y = crop / static_cast<float>(unclipped_h);
    out_w = static_cast<int>(std::round(static_cast<float>(x2 - x1 + 1) * scale_x));
    out_h = static_cast<int>(std::round(static_cast<float>(y2 - y1 + 1) * scale_y));
    pad_x1 = static_cast<int>(std::round(static_cast<float>(pad_x1) * scale_x));
    pad_x2 = static_cast<int>(std::round(static_cast<float>(pad_x2) * scale_x));
    pad_y1 = static_cast<int>(std::round(static_cast<float>(pad_y1) * scale_y));
    pad_h = pad_y1;
    pad_w = mirror ? pad_x2 : pad_x1;  // the padding mirrors with the window
    // Rounding may overshoot the crop.
    out_h = std::min(out_h, crop_ - pad_h);
    out_w = std::min(out_w, crop_ - pad_w);
  }
  if (out_h < 1 || out_w < 1) return;  // nothing of the image lands in the crop (Caffe aborts)
  Image region;
  region.channels = 3;
  region.height = y2 - y1 + 1;
  region.width = x2 - x1 + 1;
  region.pixels.resize(size_t{3} * region.height * region.width);
  for (int c = 0; c < 3; ++c) {
    for (int h = 0; h < region.height; ++h) {
      const uint8_t* src =
          image.pixels.data() + (static_cast<size_t>(c) * image.height + y1 + h) * image.width + x1;
      std::copy(src, src + region.width,
                region.pixels.data() + (static_cast<size_t>(c) * region.height + h) * region.width);
    }
  }
  const Image warped = ResizeImage(region, out_h, out_w);
  for (int c = 0; c < 3; ++c) {
    for (int h = 0; h < out_h; ++h) {
      for (int w = 0; w < out_w; ++w) {
        const int src_w = mirror ? out_w - 1 - w : w;
        const float pixel = warped.pixels[(static_cast<size_t>(c) * out_h + h) * out_w + src_w];
        const int oh = h + pad_h, ow = w + pad_w;
        float mean = 0.f;
        if (!mean_image_.empty()) {
          mean = mean_image_[(static_cast<size_t>(c) * mean_height_ + oh + mean_off_) *
                                 mean_width_ +
                             ow + mean_off_];
        } else if (!mean_channel_.empty()) {
          mean = mean_channel_[c];
        }
        out[(static_cast<size_t>(c) * crop_ + oh) * crop_ + ow] = (pixel - mean) * scale_;
      }
    }
  }
}

Status WindowDataLayer::ReadBatch(int64_t t, const BlobVec& top) {
  const int64_t slot = t * context().world_size + context().rank;
  const int num_bg = batch_size_ - num_fg_;
  const int64_t per_item = int64_t{3} * crop_ * crop_;
  float* data = top[0]->mutable_cpu_data();
  std::fill(data, data + top[0]->count(), 0.f);
  int item = 0;
  for (int is_fg = 0; is_fg < 2; ++is_fg) {
    const std::vector<Window>& set = is_fg ? fg_ : bg_;
    const int count = is_fg ? num_fg_ : num_bg;
    const uint64_t stream = MixSeed(seed_, is_fg ? kForegroundStream : kBackgroundStream);
    for (int k = 0; k < count; ++k, ++item) {
      const int64_t q = slot * count + k;
      Rng rng(MixSeed(stream, static_cast<uint64_t>(q)));
      const Window& window = set[rng.Below(static_cast<uint32_t>(set.size()))];
      const bool mirror = mirror_ && rng.Below(2) == 1;
      const WindowImage& info = images_[static_cast<size_t>(window.image)];
      if (!cache_.empty()) {
        CropWindow(cache_[static_cast<size_t>(window.image)], window, mirror,
                   data + item * per_item);
      } else {
        auto image = LoadImage(info);
        if (!image.ok()) return image.status().WithContext(source_ + ":" + std::to_string(info.line));
        if (image.value().height != info.height || image.value().width != info.width) {
          return Status::InvalidArgument(source_ + ":" + std::to_string(info.line) + ": " +
                                         info.path + ": image changed size since the net loaded");
        }
        CropWindow(image.value(), window, mirror, data + item * per_item);
      }
      if (top.size() > 1) top[1]->mutable_cpu_data()[item] = static_cast<float>(window.label);
    }
  }
  set_delivered_first(slot * batch_size_);
  return Status::Ok();
}

PSTRAIN_REGISTER_LAYER("WindowData", WindowDataLayer);

}  // namespace pstrain

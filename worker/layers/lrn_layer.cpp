#include "worker/layers/lrn_layer.hpp"

#include <algorithm>
#include <cmath>

#include "worker/layer_registry.hpp"

namespace pstrain {

LrnLayer::LrnLayer(const caffe::LayerParameter& param) : Layer(param) {}
LrnLayer::~LrnLayer() = default;

Status LrnLayer::LayerSetUp(const BlobVec&, const BlobVec&) {
  const caffe::LRNParameter& p = layer_param().lrn_param();
  if (p.local_size() % 2 == 0) {
    return Status::Error("LRN only supports odd values for local_size, got " +
                         std::to_string(p.local_size()));
  }
  size_ = static_cast<int>(p.local_size());
  beta_ = p.beta();
  across_ = p.norm_region() == caffe::LRNParameter::ACROSS_CHANNELS;
  // Caffe's WITHIN_CHANNEL is average pooling of the squares then a power
  // layer with shift 1: k does not enter, and the average divides by n^2.
  alpha_ = across_ ? p.alpha() / static_cast<float>(size_)
                   : p.alpha() / static_cast<float>(size_ * size_);
  k_ = across_ ? p.k() : 1.f;
  return Status::Ok();
}

Status LrnLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() != 4) {
    return Status::Error("LRN needs a 4-axis bottom (num, channels, height, width), got " +
                         bottom[0]->shape_string());
  }
  if (bottom[0] == top[0]) return Status::Error("LRN cannot run in place");
  num_ = bottom[0]->num();
  channels_ = bottom[0]->channels();
  height_ = bottom[0]->height();
  width_ = bottom[0]->width();
  top[0]->ReshapeLike(*bottom[0]);
  scale_.ReshapeLike(*bottom[0]);
  scratch_.ReshapeLike(*bottom[0]);
  if (across_) power_.ReshapeLike(*bottom[0]);
  return Status::Ok();
}

std::vector<std::string> LrnLayer::CpuImplementations() const {
  if (across_) return {"vector", "onednn", "reference"};
  return {"onednn", "reference"};
}

Status LrnLayer::SelectCpuImplementation(const std::string& name) {
  const std::vector<std::string> names = CpuImplementations();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return Layer::SelectCpuImplementation(name);  // the error naming the choices
  }
  selected_ = name;
  return Status::Ok();
}

std::string LrnLayer::CpuImplementation() const {
  if (!selected_.empty()) return selected_;
  return across_ ? "vector" : "onednn";
}

void LrnLayer::ForwardFast(const BlobVec& bottom, const BlobVec& top) {
  const std::string impl = CpuImplementation();
  if (impl == "vector") return ForwardVector(bottom, top);
  if (impl == "onednn") return ForwardDnnl(bottom, top);
  ForwardReference(bottom, top);
}

void LrnLayer::BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  const std::string impl = CpuImplementation();
  if (impl == "vector") return BackwardVector(top, propagate_down, bottom);
  if (impl == "onednn") return BackwardDnnl(top, propagate_down, bottom);
  BackwardReference(top, propagate_down, bottom);
}

void LrnLayer::WindowSum(const float* in, float* out) const {
  const int pre = (size_ - 1) / 2;
  const int64_t plane = static_cast<int64_t>(height_) * width_;
  if (across_) {
    for (int n = 0; n < num_; ++n) {
      const float* src = in + n * channels_ * plane;
      float* dst = out + n * channels_ * plane;
      for (int c = 0; c < channels_; ++c) {
        float* o = dst + c * plane;
        std::fill(o, o + plane, 0.f);
        const int lo = std::max(0, c - pre), hi = std::min(channels_ - 1, c + pre);
        for (int j = lo; j <= hi; ++j) {
          const float* s = src + j * plane;
          for (int64_t i = 0; i < plane; ++i) o[i] += s[i];
        }
      }
    }
    return;
  }
  // Separable box sum per plane: along rows into `rows`, then down columns.
  std::vector<float> rows(plane);
  for (int64_t p = 0; p < static_cast<int64_t>(num_) * channels_; ++p) {
    const float* src = in + p * plane;
    float* dst = out + p * plane;
    for (int h = 0; h < height_; ++h) {
      for (int w = 0; w < width_; ++w) {
        float sum = 0.f;
        const int lo = std::max(0, w - pre), hi = std::min(width_ - 1, w + pre);
        for (int j = lo; j <= hi; ++j) sum += src[h * width_ + j];
        rows[h * width_ + w] = sum;
      }
    }
    for (int h = 0; h < height_; ++h) {
      float* o = dst + h * width_;
      std::fill(o, o + width_, 0.f);
      const int lo = std::max(0, h - pre), hi = std::min(height_ - 1, h + pre);
      for (int j = lo; j <= hi; ++j) {
        for (int w = 0; w < width_; ++w) o[w] += rows[j * width_ + w];
      }
    }
  }
}

void LrnLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = bottom[0]->count();
  const float* x = bottom[0]->cpu_data();
  float* squares = scratch_.mutable_cpu_data();
  for (int64_t i = 0; i < count; ++i) squares[i] = x[i] * x[i];
  float* scale = scale_.mutable_cpu_data();
  WindowSum(squares, scale);
  float* y = top[0]->mutable_cpu_data();
  for (int64_t i = 0; i < count; ++i) {
    scale[i] = k_ + alpha_ * scale[i];
    y[i] = x[i] * std::pow(scale[i], -beta_);
  }
}

// With s the scale: d top_p / d x_q = [p == q] s_q^-beta
//   - 2 alpha beta x_q * top_p / s_p for every p whose window holds q.
// Windows are symmetric, so the second sum runs over q's own window.
void LrnLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int64_t count = bottom[0]->count();
  const float* x = bottom[0]->cpu_data();
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  const float* scale = scale_.cpu_data();
  float* ratio = scratch_.mutable_cpu_data();
  for (int64_t i = 0; i < count; ++i) ratio[i] = dy[i] * y[i] / scale[i];
  float* dx = bottom[0]->mutable_cpu_diff();
  WindowSum(ratio, dx);
  const float factor = 2.f * alpha_ * beta_;
  for (int64_t i = 0; i < count; ++i) {
    dx[i] = dy[i] * std::pow(scale[i], -beta_) - factor * x[i] * dx[i];
  }
}

PSTRAIN_REGISTER_LAYER("LRN", LrnLayer);

}  // namespace pstrain

#include "worker/layers/pooling_layer.hpp"

#include <algorithm>
#include <cfloat>
#include <string>

#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

using caffe::PoolingParameter;

std::string Pair(int h, int w) { return std::to_string(h) + "x" + std::to_string(w); }

// Caffe's pooled size. REQUIRES: in + 2 pad >= kernel, stride > 0, pad < kernel.
int PooledSize(int in, int pad, int kernel, int stride, bool floor) {
  const int span = in + 2 * pad - kernel;
  int out = (floor ? span / stride : (span + stride - 1) / stride) + 1;
  // The last window must start inside the input or its left padding.
  if (pad > 0 && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace

PoolingLayer::PoolingLayer(const caffe::LayerParameter& param) : Layer(param) {}
PoolingLayer::~PoolingLayer() = default;

Status PoolingLayer::LayerSetUp(const BlobVec& bottom, const BlobVec&) {
  const PoolingParameter& p = param_.pooling_param();
  if (p.pool() == PoolingParameter::STOCHASTIC) {
    return Status::Error("pool: STOCHASTIC is not supported (only MAX and AVE)");
  }
  max_ = p.pool() == PoolingParameter::MAX;
  global_ = p.global_pooling();
  floor_ = p.round_mode() == PoolingParameter::FLOOR;
  if (bottom[0]->num_axes() != 4) {
    return Status::Error("Pooling needs a 4-D bottom (N, C, H, W), bottom 0 has " +
                         std::to_string(bottom[0]->num_axes()) + " axes");
  }
  const bool any_kernel = p.has_kernel_size() || p.has_kernel_h() || p.has_kernel_w();
  if (global_) {
    if (any_kernel) return Status::Error("kernel_size must not be given with global_pooling");
    kernel_h_ = bottom[0]->shape(2);
    kernel_w_ = bottom[0]->shape(3);
  } else if (p.has_kernel_size()) {
    if (p.has_kernel_h() || p.has_kernel_w()) {
      return Status::Error("give either kernel_size or kernel_h/kernel_w, not both");
    }
    kernel_h_ = kernel_w_ = static_cast<int>(p.kernel_size());
  } else if (p.has_kernel_h() && p.has_kernel_w()) {
    kernel_h_ = static_cast<int>(p.kernel_h());
    kernel_w_ = static_cast<int>(p.kernel_w());
  } else {
    return Status::Error(any_kernel ? "kernel_h and kernel_w must be given together"
                                    : "kernel_size must be given");
  }
  if (p.has_pad() && (p.has_pad_h() || p.has_pad_w())) {
    return Status::Error("give either pad or pad_h/pad_w, not both");
  }
  if (p.has_pad_h() != p.has_pad_w()) {
    return Status::Error("pad_h and pad_w must be given together");
  }
  pad_h_ = static_cast<int>(p.has_pad_h() ? p.pad_h() : p.pad());
  pad_w_ = static_cast<int>(p.has_pad_w() ? p.pad_w() : p.pad());
  if (p.has_stride() && (p.has_stride_h() || p.has_stride_w())) {
    return Status::Error("give either stride or stride_h/stride_w, not both");
  }
  if (p.has_stride_h() != p.has_stride_w()) {
    return Status::Error("stride_h and stride_w must be given together");
  }
  stride_h_ = static_cast<int>(p.has_stride_h() ? p.stride_h() : p.stride());
  stride_w_ = static_cast<int>(p.has_stride_w() ? p.stride_w() : p.stride());
  if (kernel_h_ <= 0 || kernel_w_ <= 0) {
    return Status::Error("kernel size must be positive, got " + Pair(kernel_h_, kernel_w_));
  }
  if (stride_h_ <= 0 || stride_w_ <= 0) {
    return Status::Error("stride must be positive, got " + Pair(stride_h_, stride_w_));
  }
  if (global_ && (pad_h_ != 0 || pad_w_ != 0 || stride_h_ != 1 || stride_w_ != 1)) {
    return Status::Error("global_pooling needs pad 0 and stride 1");
  }
  if (pad_h_ >= kernel_h_ || pad_w_ >= kernel_w_) {
    return Status::Error("pad " + Pair(pad_h_, pad_w_) + " must be smaller than the kernel " +
                         Pair(kernel_h_, kernel_w_));
  }
  return Status::Ok();
}

Status PoolingLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& b = *bottom[0];
  if (b.num_axes() != 4) {
    return Status::Error("Pooling needs a 4-D bottom (N, C, H, W), bottom 0 has " +
                         std::to_string(b.num_axes()) + " axes");
  }
  if (global_) {
    kernel_h_ = b.shape(2);
    kernel_w_ = b.shape(3);
  }
  if (b.shape(2) + 2 * pad_h_ < kernel_h_ || b.shape(3) + 2 * pad_w_ < kernel_w_) {
    return Status::Error("kernel " + Pair(kernel_h_, kernel_w_) + " is larger than the input " +
                         Pair(b.shape(2), b.shape(3)) + " with pad " + Pair(pad_h_, pad_w_));
  }
  // Rounding up can add an output whose window starts past the input when the
  // kernel is smaller than the stride (an empty window, read out of bounds):
  // refused, naming the sizes (found by fuzz/fuzz_net_prototxt.cpp).
  const int pooled_h = PooledSize(b.shape(2), pad_h_, kernel_h_, stride_h_, floor_);
  const int pooled_w = PooledSize(b.shape(3), pad_w_, kernel_w_, stride_w_, floor_);
  if (int64_t{pooled_h - 1} * stride_h_ - pad_h_ >= b.shape(2) ||
      int64_t{pooled_w - 1} * stride_w_ - pad_w_ >= b.shape(3)) {
    return Status::Error("kernel " + Pair(kernel_h_, kernel_w_) + " with stride " +
                         Pair(stride_h_, stride_w_) + " and pad " + Pair(pad_h_, pad_w_) +
                         " puts the last output's window outside the input " +
                         Pair(b.shape(2), b.shape(3)));
  }
  const bool shape_changed = num_ != b.shape(0) || channels_ != b.shape(1) ||
                             height_ != b.shape(2) || width_ != b.shape(3);
  num_ = b.shape(0);
  channels_ = b.shape(1);
  height_ = b.shape(2);
  width_ = b.shape(3);
  pooled_h_ = pooled_h;
  pooled_w_ = pooled_w;
  for (Blob* t : top) t->Reshape({num_, channels_, pooled_h_, pooled_w_});
  if (max_) max_index_.resize(top[0]->count());
  if (shape_changed || num_tops_ != top.size()) {
    dnnl_.reset();
    dnnl_unusable_ = false;
  }
  num_tops_ = top.size();
  if (engine() == Engine::kFast && CpuImplementation() == "onednn") PrepareDnnl(top.size());
  return Status::Ok();
}

std::vector<std::string> PoolingLayer::CpuImplementations() const {
  std::vector<std::string> names = {"vector"};
  if (DnnlExpressible() && !dnnl_unusable_) names.push_back("onednn");
  names.push_back("reference");
  return names;
}

Status PoolingLayer::SelectCpuImplementation(const std::string& name) {
  const std::vector<std::string> names = CpuImplementations();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return Layer::SelectCpuImplementation(name);  // the error naming the choices
  }
  selected_ = name;
  return Status::Ok();
}

std::string PoolingLayer::CpuImplementation() const {
  if (selected_.empty() || selected_ == "vector" || selected_ == "reference") {
    return selected_.empty() ? "vector" : selected_;
  }
  // "onednn" where it can run this shape; the default otherwise.
  return DnnlExpressible() && !dnnl_unusable_ ? selected_ : "vector";
}

void PoolingLayer::ForwardFast(const BlobVec& bottom, const BlobVec& top) {
  const std::string impl = CpuImplementation();
  if (impl == "onednn" && PrepareDnnl(top.size())) return ForwardDnnl(bottom, top);
  if (impl == "reference") return ForwardReference(bottom, top);
  ForwardVector(bottom, top);
}

void PoolingLayer::BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  const std::string impl = CpuImplementation();
  if (impl == "onednn" && PrepareDnnl(top.size())) return BackwardDnnl(top, propagate_down, bottom);
  if (impl == "reference") return BackwardReference(top, propagate_down, bottom);
  BackwardVector(top, propagate_down, bottom);
}

PoolingLayer::Window PoolingLayer::WindowAt(int ph, int pw) const {
  Window w;
  w.h0 = ph * stride_h_ - pad_h_;
  w.w0 = pw * stride_w_ - pad_w_;
  w.h1 = std::min(w.h0 + kernel_h_, height_ + pad_h_);
  w.w1 = std::min(w.w0 + kernel_w_, width_ + pad_w_);
  w.pool_size = (w.h1 - w.h0) * (w.w1 - w.w0);
  w.h0 = std::max(w.h0, 0);
  w.w0 = std::max(w.w0, 0);
  w.h1 = std::min(w.h1, height_);
  w.w1 = std::min(w.w1, width_);
  return w;
}

void PoolingLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const int64_t in_plane = static_cast<int64_t>(height_) * width_;
  const int64_t out_plane = static_cast<int64_t>(pooled_h_) * pooled_w_;
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  float* mask_top = top.size() > 1 ? top[1]->mutable_cpu_data() : nullptr;
  for (int64_t plane = 0; plane < static_cast<int64_t>(num_) * channels_; ++plane) {
    const float* x = in + plane * in_plane;
    for (int ph = 0; ph < pooled_h_; ++ph) {
      for (int pw = 0; pw < pooled_w_; ++pw) {
        const Window w = WindowAt(ph, pw);
        const int64_t o = plane * out_plane + ph * pooled_w_ + pw;
        if (max_) {
          // The first maximum wins (Caffe); the window is never empty.
          int best = w.h0 * width_ + w.w0;
          float best_value = x[best];
          for (int h = w.h0; h < w.h1; ++h) {
            for (int c = w.w0; c < w.w1; ++c) {
              if (x[h * width_ + c] > best_value) {
                best = h * width_ + c;
                best_value = x[best];
              }
            }
          }
          out[o] = best_value;
          if (mask_top != nullptr) {
            mask_top[o] = static_cast<float>(best);
          } else {
            max_index_[o] = best;
          }
        } else {
          float sum = 0.f;
          for (int h = w.h0; h < w.h1; ++h) {
            for (int c = w.w0; c < w.w1; ++c) sum += x[h * width_ + c];
          }
          out[o] = sum / static_cast<float>(w.pool_size);
        }
      }
    }
  }
}

void PoolingLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int64_t in_plane = static_cast<int64_t>(height_) * width_;
  const int64_t out_plane = static_cast<int64_t>(pooled_h_) * pooled_w_;
  const float* dout = top[0]->cpu_diff();
  const float* mask_top = top.size() > 1 ? top[1]->cpu_data() : nullptr;
  float* din = bottom[0]->mutable_cpu_diff();
  std::fill(din, din + bottom[0]->count(), 0.f);
  for (int64_t plane = 0; plane < static_cast<int64_t>(num_) * channels_; ++plane) {
    float* dx = din + plane * in_plane;
    for (int ph = 0; ph < pooled_h_; ++ph) {
      for (int pw = 0; pw < pooled_w_; ++pw) {
        const int64_t o = plane * out_plane + ph * pooled_w_ + pw;
        if (max_) {
          const int index = mask_top != nullptr ? static_cast<int>(mask_top[o]) : max_index_[o];
          dx[index] += dout[o];
        } else {
          const Window w = WindowAt(ph, pw);
          const float g = dout[o] / static_cast<float>(w.pool_size);
          for (int h = w.h0; h < w.h1; ++h) {
            for (int c = w.w0; c < w.w1; ++c) dx[h * width_ + c] += g;
          }
        }
      }
    }
  }
}

PSTRAIN_REGISTER_LAYER("Pooling", PoolingLayer);

}  // namespace pstrain

#include "worker/layers/conv_layer.hpp"

#include <algorithm>
#include <functional>
#include <iterator>
#include <string>

#include "common/math_cpu.hpp"
#include "worker/filler.hpp"
#include "worker/layer_registry.hpp"
#include "worker/layers/conv_winograd.hpp"

namespace pstrain {
namespace {

std::string Str(int v) { return std::to_string(v); }
std::string Pair(int h, int w) { return Str(h) + "x" + Str(w); }

// Reads a repeated per-spatial-axis field: none -> `fallback`, one value -> both
// axes, two values -> (h, w).
Status PerAxis(const google::protobuf::RepeatedField<uint32_t>& field, const char* name,
               int fallback, int* h, int* w) {
  if (field.size() > 2) {
    return Status::Error(std::string(name) +
                         " must be given once or once per spatial axis (2), got " +
                         Str(field.size()) + " values");
  }
  *h = field.empty() ? fallback : static_cast<int>(field.Get(0));
  *w = field.empty() ? fallback : static_cast<int>(field.Get(field.size() - 1));
  return Status::Ok();
}

Status ParseGeometry(const caffe::ConvolutionParameter& p, ConvGeometry* g) {
  g->num_output = static_cast<int>(p.num_output());
  g->group = static_cast<int>(p.group());
  g->bias_term = p.bias_term();
  if (p.has_kernel_h() || p.has_kernel_w()) {
    if (!p.has_kernel_h() || !p.has_kernel_w()) {
      return Status::Error("kernel_h and kernel_w must be given together");
    }
    if (p.kernel_size_size() > 0) {
      return Status::Error("give either kernel_size or kernel_h/kernel_w, not both");
    }
    g->kernel_h = static_cast<int>(p.kernel_h());
    g->kernel_w = static_cast<int>(p.kernel_w());
  } else {
    if (p.kernel_size_size() == 0) return Status::Error("kernel_size must be given");
    PSTRAIN_RETURN_IF_ERROR(PerAxis(p.kernel_size(), "kernel_size", 0, &g->kernel_h, &g->kernel_w));
  }
  if (p.has_pad_h() || p.has_pad_w()) {
    if (p.pad_size() > 0) return Status::Error("give either pad or pad_h/pad_w, not both");
    g->pad_h = static_cast<int>(p.pad_h());
    g->pad_w = static_cast<int>(p.pad_w());
  } else {
    PSTRAIN_RETURN_IF_ERROR(PerAxis(p.pad(), "pad", 0, &g->pad_h, &g->pad_w));
  }
  if (p.has_stride_h() || p.has_stride_w()) {
    if (!p.has_stride_h() || !p.has_stride_w()) {
      return Status::Error("stride_h and stride_w must be given together");
    }
    if (p.stride_size() > 0)
      return Status::Error("give either stride or stride_h/stride_w, not both");
    g->stride_h = static_cast<int>(p.stride_h());
    g->stride_w = static_cast<int>(p.stride_w());
  } else {
    PSTRAIN_RETURN_IF_ERROR(PerAxis(p.stride(), "stride", 1, &g->stride_h, &g->stride_w));
  }
  PSTRAIN_RETURN_IF_ERROR(PerAxis(p.dilation(), "dilation", 1, &g->dilation_h, &g->dilation_w));
  if (g->kernel_h <= 0 || g->kernel_w <= 0) {
    return Status::Error("kernel size must be positive, got " + Pair(g->kernel_h, g->kernel_w));
  }
  if (g->stride_h <= 0 || g->stride_w <= 0) {
    return Status::Error("stride must be positive, got " + Pair(g->stride_h, g->stride_w));
  }
  if (g->dilation_h <= 0 || g->dilation_w <= 0) {
    return Status::Error("dilation must be positive, got " + Pair(g->dilation_h, g->dilation_w));
  }
  if (g->num_output <= 0) return Status::Error("num_output must be positive");
  if (g->group <= 0) return Status::Error("group must be positive");
  if (g->num_output % g->group != 0) {
    return Status::Error("num_output (" + Str(g->num_output) + ") must be divisible by group (" +
                         Str(g->group) + ")");
  }
  return Status::Ok();
}

// Rows (c, kh, kw) x columns (oh, ow) of the zero-padded, dilated input patches.
void Im2ColImage(const float* im, int channels, int height, int width, const ConvGeometry& g,
                 int out_h, int out_w, float* col) {
  for (int c = 0; c < channels; ++c) {
    for (int kh = 0; kh < g.kernel_h; ++kh) {
      for (int kw = 0; kw < g.kernel_w; ++kw) {
        for (int oh = 0; oh < out_h; ++oh) {
          const int ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
          if (ih < 0 || ih >= height) {
            std::fill(col, col + out_w, 0.f);
            col += out_w;
            continue;
          }
          const float* row = im + (static_cast<int64_t>(c) * height + ih) * width;
          int iw = kw * g.dilation_w - g.pad_w;
          for (int ow = 0; ow < out_w; ++ow, iw += g.stride_w) {
            *col++ = (iw >= 0 && iw < width) ? row[iw] : 0.f;
          }
        }
      }
    }
  }
}

// The adjoint of Im2ColImage: adds every column entry back to its input pixel.
// `im` is overwritten.
void Col2ImImage(const float* col, int channels, int height, int width, const ConvGeometry& g,
                 int out_h, int out_w, float* im) {
  std::fill(im, im + static_cast<int64_t>(channels) * height * width, 0.f);
  for (int c = 0; c < channels; ++c) {
    for (int kh = 0; kh < g.kernel_h; ++kh) {
      for (int kw = 0; kw < g.kernel_w; ++kw) {
        for (int oh = 0; oh < out_h; ++oh) {
          const int ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
          if (ih < 0 || ih >= height) {
            col += out_w;
            continue;
          }
          float* row = im + (static_cast<int64_t>(c) * height + ih) * width;
          int iw = kw * g.dilation_w - g.pad_w;
          for (int ow = 0; ow < out_w; ++ow, iw += g.stride_w, ++col) {
            if (iw >= 0 && iw < width) row[iw] += *col;
          }
        }
      }
    }
  }
}

}  // namespace

Status ParseConvGeometry(const caffe::ConvolutionParameter& p, ConvGeometry* g) {
  return ParseGeometry(p, g);
}

ConvolutionLayer::ConvolutionLayer(const caffe::LayerParameter& param) : Layer(param) {}

Status ConvolutionLayer::LayerSetUp(const BlobVec& bottom, const BlobVec&) {
  const caffe::ConvolutionParameter& p = param_.convolution_param();
  const Blob& b0 = *bottom[0];
  if (p.axis() < -b0.num_axes() || p.axis() >= b0.num_axes() ||
      b0.CanonicalAxisIndex(p.axis()) != 1) {
    return Status::Error("Convolution supports only axis 1 (channels), got axis " + Str(p.axis()));
  }
  if (b0.num_axes() != 4) {
    return Status::Error("bottom 0 has " + Str(b0.num_axes()) + " axes (" +
                         Str(std::max(0, b0.num_axes() - 2)) +
                         " spatial); only 2-D convolution (N, C, H, W) is supported, "
                         "N-D convolution is not supported");
  }
  PSTRAIN_RETURN_IF_ERROR(ParseGeometry(p, &geo_));
  channels_ = b0.shape(1);
  if (channels_ % geo_.group != 0) {
    return Status::Error("channels (" + Str(channels_) + ") must be divisible by group (" +
                         Str(geo_.group) + ")");
  }
  const std::vector<int> weight_shape = {geo_.num_output, channels_ / geo_.group, geo_.kernel_h,
                                         geo_.kernel_w};
  return SetUpConvParams(p, weight_shape, geo_, context(), name(), &blobs_);
}

Status SetUpConvParams(const caffe::ConvolutionParameter& p, const std::vector<int>& weight_shape,
                       const ConvGeometry& g, const NetContext& context, const std::string& name,
                       std::vector<std::shared_ptr<Blob>>* blobs) {
  if (!blobs->empty()) {  // pre-loaded or shared: check, do not refill
    const size_t num_params = g.bias_term ? 2 : 1;
    if (blobs->size() != num_params) {
      return Status::Error("expected " + Str(static_cast<int>(num_params)) + " param blobs, got " +
                           Str(static_cast<int>(blobs->size())));
    }
    if ((*blobs)[0]->shape() != weight_shape) {
      return Status::Error("weight shape " + (*blobs)[0]->shape_string() +
                           " does not match the layer's " + ShapeString(weight_shape));
    }
    if (g.bias_term && (*blobs)[1]->shape() != std::vector<int>{g.num_output}) {
      return Status::Error("bias shape " + (*blobs)[1]->shape_string() +
                           " does not match the layer's " + ShapeString({g.num_output}));
    }
    return Status::Ok();
  }
  Rng rng(MixSeed(context.seed, std::hash<std::string>{}(name)));
  blobs->push_back(std::make_shared<Blob>(weight_shape));
  PSTRAIN_RETURN_IF_ERROR(ValidateFiller(p.weight_filler(), *(*blobs)[0], context.max_blob_values)
                              .WithContext("weight_filler"));
  Fill(p.weight_filler(), rng, (*blobs)[0].get());
  if (g.bias_term) {
    blobs->push_back(std::make_shared<Blob>(std::vector<int>{g.num_output}));
    PSTRAIN_RETURN_IF_ERROR(ValidateFiller(p.bias_filler(), *(*blobs)[1], context.max_blob_values)
                                .WithContext("bias_filler"));
    Fill(p.bias_filler(), rng, (*blobs)[1].get());
  }
  return Status::Ok();
}

Status CheckConvBottoms(const BlobVec& bottom, int channels, const char* type) {
  const Blob& b0 = *bottom[0];
  for (size_t i = 1; i < bottom.size(); ++i) {
    if (bottom[i]->shape() != b0.shape()) {
      return Status::Error("all bottoms must have the same shape: bottom " +
                           Str(static_cast<int>(i)) + " is " + bottom[i]->shape_string() +
                           ", bottom 0 is " + b0.shape_string());
    }
  }
  if (b0.num_axes() != 4) {
    return Status::Error("bottom 0 has " + Str(b0.num_axes()) + " axes; " + type + " needs 4");
  }
  if (b0.shape(1) != channels) {
    return Status::Error("bottom 0 has " + Str(b0.shape(1)) +
                         " channels, but the layer was set up for " + Str(channels));
  }
  return Status::Ok();
}

Status ConvolutionLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_RETURN_IF_ERROR(CheckConvBottoms(bottom, channels_, "Convolution"));
  const Blob& b0 = *bottom[0];
  const int ext_h = geo_.dilation_h * (geo_.kernel_h - 1) + 1;
  const int ext_w = geo_.dilation_w * (geo_.kernel_w - 1) + 1;
  const int span_h = b0.shape(2) + 2 * geo_.pad_h - ext_h;
  const int span_w = b0.shape(3) + 2 * geo_.pad_w - ext_w;
  if (span_h < 0 || span_w < 0) {
    return Status::Error("output size below 1: input " + Pair(b0.shape(2), b0.shape(3)) +
                         " with pad " + Pair(geo_.pad_h, geo_.pad_w) + " is smaller than the " +
                         "dilated kernel " + Pair(ext_h, ext_w));
  }
  const bool shape_changed = num_ != b0.shape(0) || height_ != b0.shape(2) || width_ != b0.shape(3);
  num_ = b0.shape(0);
  height_ = b0.shape(2);
  width_ = b0.shape(3);
  out_h_ = span_h / geo_.stride_h + 1;
  out_w_ = span_w / geo_.stride_w + 1;
  for (Blob* t : top) t->Reshape({num_, geo_.num_output, out_h_, out_w_});
  const int64_t out_spatial = static_cast<int64_t>(out_h_) * out_w_;
  col_.clear();  // reference buffers are sized lazily, on first use
  bias_multiplier_.assign(out_spatial, 1.f);
  if (shape_changed) {
    for (int l = 0; l < 2; ++l) {
      dnnl_[l].reset();
      dnnl_failed_[l] = false;
    }
    winograd_.reset();
  }
  if (engine() == Engine::kFast && RunsDnnl()) PrepareDnnl();
  return Status::Ok();
}

bool ConvolutionLayer::IsPointwise() const {
  return geo_.kernel_h == 1 && geo_.kernel_w == 1 && geo_.stride_h == 1 && geo_.stride_w == 1 &&
         geo_.pad_h == 0 && geo_.pad_w == 0;
}

void ConvolutionLayer::Im2Col(const float* image) {
  const int64_t rows = static_cast<int64_t>(channels_) * geo_.kernel_h * geo_.kernel_w;
  col_.resize(rows * out_h_ * out_w_);
  Im2ColImage(image, channels_, height_, width_, geo_, out_h_, out_w_, col_.data());
}

void ConvolutionLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const int g_out = geo_.num_output / geo_.group;  // output channels per group
  const int g_k = channels_ / geo_.group * geo_.kernel_h * geo_.kernel_w;  // col rows per group
  const int spatial = out_h_ * out_w_;
  const int64_t in_size = static_cast<int64_t>(channels_) * height_ * width_;
  const int64_t out_size = static_cast<int64_t>(geo_.num_output) * spatial;
  const float* weights = blobs_[0]->cpu_data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    const float* in = bottom[i]->cpu_data();
    float* out = top[i]->mutable_cpu_data();
    for (int n = 0; n < num_; ++n) {
      const float* col = in + n * in_size;
      if (!IsPointwise()) {
        Im2Col(col);
        col = col_.data();
      }
      for (int g = 0; g < geo_.group; ++g) {
        CpuGemm(Trans::kNo, Trans::kNo, g_out, spatial, g_k, 1.f,
                weights + static_cast<int64_t>(g) * g_out * g_k,
                col + static_cast<int64_t>(g) * g_k * spatial, 0.f,
                out + n * out_size + static_cast<int64_t>(g) * g_out * spatial);
      }
      if (geo_.bias_term) {
        CpuGemm(Trans::kNo, Trans::kNo, geo_.num_output, spatial, 1, 1.f, blobs_[1]->cpu_data(),
                bias_multiplier_.data(), 1.f, out + n * out_size);
      }
    }
  }
}

void ConvolutionLayer::WeightGradientReference(const float* bottom_data, const float* top_diff,
                                               float* weight_diff, float* bias_diff) {
  const int g_out = geo_.num_output / geo_.group;
  const int g_k = channels_ / geo_.group * geo_.kernel_h * geo_.kernel_w;
  const int spatial = out_h_ * out_w_;
  const int64_t in_size = static_cast<int64_t>(channels_) * height_ * width_;
  const int64_t out_size = static_cast<int64_t>(geo_.num_output) * spatial;
  for (int n = 0; n < num_; ++n) {
    const float* dout = top_diff + n * out_size;
    if (bias_diff != nullptr) {
      CpuGemv(Trans::kNo, geo_.num_output, spatial, 1.f, dout, bias_multiplier_.data(), 1.f,
              bias_diff);
    }
    if (weight_diff == nullptr) continue;
    const float* col = bottom_data + n * in_size;
    if (!IsPointwise()) {
      Im2Col(col);
      col = col_.data();
    }
    for (int g = 0; g < geo_.group; ++g) {
      CpuGemm(Trans::kNo, Trans::kYes, g_out, g_k, spatial, 1.f,
              dout + static_cast<int64_t>(g) * g_out * spatial,
              col + static_cast<int64_t>(g) * g_k * spatial, 1.f,
              weight_diff + static_cast<int64_t>(g) * g_out * g_k);
    }
  }
}

void ConvolutionLayer::BackwardReference(const BlobVec& top,
                                         const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  const int g_out = geo_.num_output / geo_.group;
  const int g_k = channels_ / geo_.group * geo_.kernel_h * geo_.kernel_w;
  const int spatial = out_h_ * out_w_;
  const int64_t in_size = static_cast<int64_t>(channels_) * height_ * width_;
  const int64_t out_size = static_cast<int64_t>(geo_.num_output) * spatial;
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = geo_.bias_term && param_propagate_down(1);
  const float* weights = blobs_[0]->cpu_data();
  float* weight_diff = weight_grad ? blobs_[0]->mutable_cpu_diff() : nullptr;
  float* bias_diff = bias_grad ? blobs_[1]->mutable_cpu_diff() : nullptr;
  std::vector<float> col_diff;
  for (size_t i = 0; i < top.size(); ++i) {
    const float* top_diff = top[i]->cpu_diff();
    if (weight_grad || bias_grad) {
      WeightGradientReference(bottom[i]->cpu_data(), top_diff, weight_diff, bias_diff);
    }
    if (!propagate_down[i]) continue;
    for (int n = 0; n < num_; ++n) {
      const float* dout = top_diff + n * out_size;
      float* din = bottom[i]->mutable_cpu_diff() + n * in_size;
      // For a pointwise kernel the column gradient is the bottom gradient itself.
      if (!IsPointwise()) col_diff.resize(static_cast<size_t>(g_k) * geo_.group * spatial);
      float* cd = IsPointwise() ? din : col_diff.data();
      for (int g = 0; g < geo_.group; ++g) {
        CpuGemm(Trans::kYes, Trans::kNo, g_k, spatial, g_out, 1.f,
                weights + static_cast<int64_t>(g) * g_out * g_k,
                dout + static_cast<int64_t>(g) * g_out * spatial, 0.f,
                cd + static_cast<int64_t>(g) * g_k * spatial);
      }
      if (!IsPointwise()) {
        Col2ImImage(col_diff.data(), channels_, height_, width_, geo_, out_h_, out_w_, din);
      }
    }
  }
}

namespace {

// In CpuImpl's order.
constexpr const char* kImplNames[] = {"onednn-blocked",    "onednn",    "onednn-blocked+gemm-wgrad",
                                      "onednn+gemm-wgrad", "reference", "winograd"};

}  // namespace

ConvolutionLayer::~ConvolutionLayer() = default;

std::vector<std::string> ConvolutionLayer::CpuImplementations() const {
  // "winograd" (last) only where it computes this geometry.
  const size_t count = std::size(kImplNames) - (WinogradApplies(geo_) ? 0 : 1);
  return {std::begin(kImplNames), std::begin(kImplNames) + count};
}

Status ConvolutionLayer::SelectCpuImplementation(const std::string& name) {
  const std::vector<std::string> names = CpuImplementations();
  for (size_t k = 0; k < names.size(); ++k) {
    if (name != names[k]) continue;
    cpu_impl_ = static_cast<CpuImpl>(k);
    return Status::Ok();
  }
  return Layer::SelectCpuImplementation(name);  // the error naming the choices
}

std::string ConvolutionLayer::CpuImplementation() const {
  if (RunsDnnl() && dnnl_failed_[Layout()]) return "reference";
  return kImplNames[static_cast<int>(cpu_impl_)];
}

WinogradConv& ConvolutionLayer::PrepareWinograd() {
  if (winograd_ == nullptr) {
    winograd_ =
        std::make_unique<WinogradConv>(geo_, num_, channels_, height_, width_, out_h_, out_w_);
  }
  return *winograd_;
}

PSTRAIN_REGISTER_LAYER("Convolution", ConvolutionLayer);

}  // namespace pstrain

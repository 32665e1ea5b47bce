#include "worker/layers/deconv_layer.hpp"

#include <functional>
#include <string>

#include "common/math_cpu.hpp"
#include "worker/filler.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

std::string Str(int v) { return std::to_string(v); }

// A blob's values on the device (gpu) or the host.
const float* Data(const Blob& b, bool gpu) {
#ifdef PSTRAIN_HAVE_CUDA
  if (gpu) return b.gpu_data();
#endif
  (void)gpu;
  return b.cpu_data();
}
const float* Diff(const Blob& b, bool gpu) {
#ifdef PSTRAIN_HAVE_CUDA
  if (gpu) return b.gpu_diff();
#endif
  (void)gpu;
  return b.cpu_diff();
}
float* MutableData(Blob& b, bool gpu) {
#ifdef PSTRAIN_HAVE_CUDA
  if (gpu) return b.mutable_gpu_data();
#endif
  (void)gpu;
  return b.mutable_cpu_data();
}
float* MutableDiff(Blob& b, bool gpu) {
#ifdef PSTRAIN_HAVE_CUDA
  if (gpu) return b.mutable_gpu_diff();
#endif
  (void)gpu;
  return b.mutable_cpu_diff();
}

}  // namespace

DeconvolutionLayer::DeconvolutionLayer(const caffe::LayerParameter& param) : Layer(param) {}
DeconvolutionLayer::~DeconvolutionLayer() = default;

Status DeconvolutionLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const caffe::ConvolutionParameter& p = param_.convolution_param();
  const Blob& b0 = *bottom[0];
  if (p.axis() < -b0.num_axes() || p.axis() >= b0.num_axes() ||
      b0.CanonicalAxisIndex(p.axis()) != 1) {
    return Status::Error("Deconvolution supports only axis 1 (channels), got axis " +
                         Str(p.axis()));
  }
  if (b0.num_axes() != 4) {
    return Status::Error("bottom 0 has " + Str(b0.num_axes()) +
                         " axes; only 2-D deconvolution (N, C, H, W) is supported");
  }
  PSTRAIN_RETURN_IF_ERROR(ParseConvGeometry(p, &geo_));
  channels_ = b0.shape(1);
  if (channels_ % geo_.group != 0) {
    return Status::Error("channels (" + Str(channels_) + ") must be divisible by group (" +
                         Str(geo_.group) + ")");
  }
  const std::vector<int> weight_shape = {channels_, geo_.num_output / geo_.group, geo_.kernel_h,
                                         geo_.kernel_w};
  PSTRAIN_RETURN_IF_ERROR(SetUpConvParams(p, weight_shape, geo_, context(), name(), &blobs_));
  // The adjoint convolution: num_output and channels swap roles.
  caffe::LayerParameter adjoint;
  adjoint.set_name(name() + " (adjoint convolution)");
  adjoint.set_type("Convolution");
  *adjoint.mutable_convolution_param() = p;
  adjoint.mutable_convolution_param()->set_num_output(channels_);
  adjoint.mutable_convolution_param()->set_bias_term(false);
  adjoint.mutable_convolution_param()->clear_weight_filler();
  adjoint.mutable_convolution_param()->clear_bias_filler();
  adjoint_ = std::make_unique<ConvolutionLayer>(adjoint);
  adjoint_->set_context(context());
  adjoint_->set_engine(engine());
  adjoint_->blobs().push_back(blobs_[0]);
  PSTRAIN_RETURN_IF_ERROR(Reshape(bottom, top));  // sizes adjoint_in_
  PSTRAIN_RETURN_IF_ERROR(
      adjoint_->SetUp({&adjoint_in_}, {&adjoint_out_}).WithContext("adjoint convolution"));
  adjoint_set_up_ = true;
  return Status::Ok();
}

Status DeconvolutionLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_RETURN_IF_ERROR(CheckConvBottoms(bottom, channels_, "Deconvolution"));
  const Blob& b0 = *bottom[0];
  const int ext_h = geo_.dilation_h * (geo_.kernel_h - 1) + 1;
  const int ext_w = geo_.dilation_w * (geo_.kernel_w - 1) + 1;
  const int64_t out_h = static_cast<int64_t>(geo_.stride_h) * (b0.shape(2) - 1) + ext_h -
                        2 * static_cast<int64_t>(geo_.pad_h);
  const int64_t out_w = static_cast<int64_t>(geo_.stride_w) * (b0.shape(3) - 1) + ext_w -
                        2 * static_cast<int64_t>(geo_.pad_w);
  if (b0.shape(2) < 1 || b0.shape(3) < 1 || out_h < 1 || out_w < 1) {
    return Status::Error("output size below 1: input " + Str(b0.shape(2)) + "x" + Str(b0.shape(3)) +
                         " with stride " + Str(geo_.stride_h) + "x" + Str(geo_.stride_w) +
                         ", kernel extent " + Str(ext_h) + "x" + Str(ext_w) + " and pad " +
                         Str(geo_.pad_h) + "x" + Str(geo_.pad_w) + " gives " +
                         std::to_string(out_h) + "x" + std::to_string(out_w));
  }
  if (out_h > kMaxBlobValues || out_w > kMaxBlobValues) {
    return Status::Error("output size " + std::to_string(out_h) + "x" + std::to_string(out_w) +
                         " is too large");
  }
  num_ = b0.shape(0);
  out_h_ = static_cast<int>(out_h);
  out_w_ = static_cast<int>(out_w);
  const std::vector<int> top_shape = {num_, geo_.num_output, out_h_, out_w_};
  for (Blob* t : top) t->Reshape(top_shape);
  adjoint_in_.Reshape(top_shape);
  if (!adjoint_set_up_) return Status::Ok();  // LayerSetUp sets the adjoint up next
  adjoint_->set_engine(engine());
  PSTRAIN_RETURN_IF_ERROR(
      adjoint_->Reshape({&adjoint_in_}, {&adjoint_out_}).WithContext("adjoint convolution"));
  if (adjoint_out_.shape() != b0.shape()) {  // our bug: the sizes are each other's inverse
    return Status::Error("adjoint convolution gives " + adjoint_out_.shape_string() +
                         " for bottom " + b0.shape_string());
  }
  return Status::Ok();
}

void DeconvolutionLayer::CopyValues(int64_t n, const float* x, float* y, bool gpu) {
#ifdef PSTRAIN_HAVE_CUDA
  if (gpu) return GpuCopyValues(n, x, y);
#endif
  (void)gpu;
  CpuCopy(n, x, y);
}

void DeconvolutionLayer::AddBias(float* top_data, bool gpu) const {
#ifdef PSTRAIN_HAVE_CUDA
  if (gpu) return GpuAddBias(top_data);
#endif
  (void)gpu;
  const int64_t spatial = static_cast<int64_t>(out_h_) * out_w_;
  const float* bias = blobs_[1]->cpu_data();
  for (int n = 0; n < num_; ++n) {
    for (int c = 0; c < geo_.num_output; ++c) {
      float* y = top_data + (static_cast<int64_t>(n) * geo_.num_output + c) * spatial;
      for (int64_t s = 0; s < spatial; ++s) y[s] += bias[c];
    }
  }
}

void DeconvolutionLayer::AddBiasGradient(const float* top_diff, bool gpu) {
#ifdef PSTRAIN_HAVE_CUDA
  if (gpu) return GpuAddBiasGradient(top_diff);
#endif
  (void)gpu;
  const int64_t spatial = static_cast<int64_t>(out_h_) * out_w_;
  float* bias_diff = blobs_[1]->mutable_cpu_diff();
  for (int n = 0; n < num_; ++n) {
    for (int c = 0; c < geo_.num_output; ++c) {
      const float* dy = top_diff + (static_cast<int64_t>(n) * geo_.num_output + c) * spatial;
      double sum = 0;
      for (int64_t s = 0; s < spatial; ++s) sum += dy[s];
      bias_diff[c] += static_cast<float>(sum);
    }
  }
}

void DeconvolutionLayer::RunForward(Engine engine, const BlobVec& bottom, const BlobVec& top) {
  const bool gpu = engine == Engine::kGpu;
  adjoint_->set_engine(engine);
  adjoint_->set_param_propagate_down(0, false);
  for (size_t i = 0; i < bottom.size(); ++i) {
    // top = adjoint^T bottom: the adjoint's backward-data with bottom as its top gradient.
    const int64_t n = bottom[i]->count();
    CopyValues(n, Data(*bottom[i], gpu), MutableDiff(adjoint_out_, gpu), gpu);
    adjoint_->Backward({&adjoint_out_}, {true}, {&adjoint_in_});
    float* y = MutableData(*top[i], gpu);
    CopyValues(top[i]->count(), Diff(adjoint_in_, gpu), y, gpu);
    if (geo_.bias_term) AddBias(y, gpu);
  }
}

void DeconvolutionLayer::RunBackward(Engine engine, const BlobVec& top,
                                     const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  const bool gpu = engine == Engine::kGpu;
  const bool weight_grad = param_propagate_down(0);
  adjoint_->set_engine(engine);
  adjoint_->set_param_propagate_down(0, weight_grad);
  for (size_t i = 0; i < top.size(); ++i) {
    const float* dy = Diff(*top[i], gpu);
    if (geo_.bias_term && param_propagate_down(1)) AddBiasGradient(dy, gpu);
    if (!weight_grad && !propagate_down[i]) continue;
    // The adjoint's input is the top gradient: its forward is the bottom
    // gradient; run first, so that oneDNN's weight gradient may reuse the
    // input it has just reordered.
    CopyValues(top[i]->count(), dy, MutableData(adjoint_in_, gpu), gpu);
    adjoint_->Forward({&adjoint_in_}, {&adjoint_out_});
    if (propagate_down[i]) {
      CopyValues(bottom[i]->count(), Data(adjoint_out_, gpu), MutableDiff(*bottom[i], gpu), gpu);
    }
    if (weight_grad) {
      // dW = the adjoint's weight gradient with the bottom data as its top gradient.
      CopyValues(bottom[i]->count(), Data(*bottom[i], gpu), MutableDiff(adjoint_out_, gpu), gpu);
      adjoint_->Backward({&adjoint_out_}, {false}, {&adjoint_in_});
    }
  }
}

void DeconvolutionLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  RunForward(Engine::kReference, bottom, top);
}
void DeconvolutionLayer::BackwardReference(const BlobVec& top,
                                           const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  RunBackward(Engine::kReference, top, propagate_down, bottom);
}
void DeconvolutionLayer::ForwardFast(const BlobVec& bottom, const BlobVec& top) {
  RunForward(Engine::kFast, bottom, top);
}
void DeconvolutionLayer::BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  RunBackward(Engine::kFast, top, propagate_down, bottom);
}

std::vector<std::string> DeconvolutionLayer::CpuImplementations() const {
  return adjoint_ != nullptr ? adjoint_->CpuImplementations() : Layer::CpuImplementations();
}

Status DeconvolutionLayer::SelectCpuImplementation(const std::string& name) {
  if (adjoint_ == nullptr) return Layer::SelectCpuImplementation(name);
  return adjoint_->SelectCpuImplementation(name);
}

std::string DeconvolutionLayer::CpuImplementation() const {
  return adjoint_ != nullptr ? adjoint_->CpuImplementation() : Layer::CpuImplementation();
}

PSTRAIN_REGISTER_LAYER("Deconvolution", DeconvolutionLayer);

}  // namespace pstrain

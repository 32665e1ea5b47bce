// ConvolutionLayer's fast path: oneDNN convolution primitives for one bottom
// shape, built in Reshape and reused until the shape changes. The only file of
// the layer that sees oneDNN; the reference path is in conv_layer.cpp, the GPU
// path in conv_layer.cu.
#include <memory>
#include <unordered_map>

#include "common/dnnl_context.hpp"
#include "common/math_cpu.hpp"
#include "worker/layers/conv_layer.hpp"
#include "worker/layers/conv_winograd.hpp"

namespace pstrain {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// One tensor argument of a oneDNN primitive. `user` wraps a blob's plain buffer
// (handle set per call); `prim` has the layout the primitive chose. When the
// layouts differ, `prim` owns a buffer and a cached reorder converts between
// them (user -> prim for inputs, prim -> user for outputs); otherwise `prim`
// is `user`.
struct DnnlArg {
  memory user;
  memory prim;
  dnnl::reorder convert;
  bool reordered = false;

  void Init(const memory::desc& user_md, const memory::desc& prim_md, bool input) {
    user = memory(user_md, DnnlEngine(), nullptr);
    reordered = user_md != prim_md;
    prim = reordered ? memory(prim_md, DnnlEngine()) : user;
    if (reordered) {
      convert = input ? dnnl::reorder(user, prim) : dnnl::reorder(prim, user);
    }
  }
  // Input: points `user` at `data` and converts it; returns what the primitive reads.
  const memory& In(const float* data) {
    user.set_data_handle(const_cast<float*>(data));
    if (reordered) convert.execute(DnnlStream(), user, prim);
    return prim;
  }
  // Output: returns what the primitive writes; Finish() converts it into `data`.
  const memory& Out(float* data) {
    user.set_data_handle(data);
    return prim;
  }
  void Finish() {
    if (reordered) convert.execute(DnnlStream(), prim, user);
  }
};

}  // namespace

class ConvolutionLayer::DnnlConv {
 public:
  // Throws dnnl::error when oneDNN cannot run the configuration.
  // `blocked`: tensors in the layouts oneDNN prefers (reordered from and to
  // the blobs' NCHW); else plain NCHW/OIHW, no reorders.
  DnnlConv(const ConvGeometry& g, int num, int channels, int height, int width, int out_h,
           int out_w, bool blocked);

  void Forward(const float* src, const float* weights, const float* bias, float* dst);
  // Any of the outputs may be null (not wanted). Weight and bias gradients are
  // added. `src_as_forwarded`: src is the one the last Forward read, unchanged
  // since, so its reordered copy may be reused.
  void Backward(const float* src, const float* weights, const float* dst_diff, float* src_diff,
                float* weight_diff, float* bias_diff, bool src_as_forwarded);

 private:
  bool bias_ = false;
  int num_output_ = 0;
  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_data bwd_data_;
  dnnl::convolution_backward_weights bwd_weights_;
  DnnlArg fwd_src_, fwd_weights_, fwd_dst_;
  memory bias_mem_;
  DnnlArg data_weights_, data_dst_diff_, data_src_diff_;
  DnnlArg wgt_src_, wgt_dst_diff_;
  bool wgt_src_is_fwd_ = false;        // backward-weights reads forward's reordered src
  bool wgt_dst_diff_is_data_ = false;  // backward-weights reads backward-data's dst diff
  memory weight_diff_prim_, weight_diff_user_, bias_diff_;
  dnnl::reorder add_weight_diff_;  // weight_diff_prim_ -> user layout, summed into it
};

void ConvolutionLayer::DnnlConvDeleter::operator()(DnnlConv* conv) const { delete conv; }

ConvolutionLayer::DnnlConv::DnnlConv(const ConvGeometry& g, int num, int channels, int height,
                                     int width, int out_h, int out_w, bool blocked)
    : bias_(g.bias_term), num_output_(g.num_output) {
  const memory::dims src_dims = {num, channels, height, width};
  const memory::dims dst_dims = {num, g.num_output, out_h, out_w};
  const memory::dims w_dims = g.group == 1
                                  ? memory::dims{g.num_output, channels, g.kernel_h, g.kernel_w}
                                  : memory::dims{g.group, g.num_output / g.group,
                                                 channels / g.group, g.kernel_h, g.kernel_w};
  const Tag w_tag = g.group == 1 ? Tag::oihw : Tag::goihw;
  const memory::dims strides = {g.stride_h, g.stride_w};
  const memory::dims dilates = {g.dilation_h - 1, g.dilation_w - 1};
  const memory::dims pad_l = {g.pad_h, g.pad_w};
  // Symmetric padding: oneDNN's output size rule (floor) is then ours.
  const memory::dims pad_r = pad_l;
  const auto f32 = memory::data_type::f32;
  const memory::desc src_user(src_dims, f32, Tag::nchw);
  const memory::desc dst_user(dst_dims, f32, Tag::nchw);
  const memory::desc w_user(w_dims, f32, w_tag);
  const memory::desc bias_md =
      g.bias_term ? memory::desc({g.num_output}, f32, Tag::x) : memory::desc();
  // Layouts of oneDNN's choice (channel-blocked on AVX2 and AVX-512), or the
  // blobs' own: which is faster depends on the shape and the ISA (engine auto
  // measures it).
  const memory::desc src_any(src_dims, f32, blocked ? Tag::any : Tag::nchw);
  const memory::desc dst_any(dst_dims, f32, blocked ? Tag::any : Tag::nchw);
  const memory::desc w_any(w_dims, f32, blocked ? Tag::any : w_tag);
  const auto algo = dnnl::algorithm::convolution_direct;
  dnnl::engine& eng = DnnlEngine();

  dnnl::convolution_forward::primitive_desc fwd_pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, src_any, w_any,
                                      bias_md, dst_any, strides, dilates, pad_l, pad_r),
      eng);
  fwd_ = dnnl::convolution_forward(fwd_pd);
  fwd_src_.Init(src_user, fwd_pd.src_desc(), true);
  fwd_weights_.Init(w_user, fwd_pd.weights_desc(), true);
  fwd_dst_.Init(dst_user, fwd_pd.dst_desc(), false);
  if (bias_) bias_mem_ = memory(bias_md, eng, nullptr);

  dnnl::convolution_backward_data::primitive_desc data_pd(
      dnnl::convolution_backward_data::desc(algo, src_any, w_any, dst_any, strides, dilates, pad_l,
                                            pad_r),
      eng, fwd_pd);
  bwd_data_ = dnnl::convolution_backward_data(data_pd);
  data_weights_.Init(w_user, data_pd.weights_desc(), true);
  data_dst_diff_.Init(dst_user, data_pd.diff_dst_desc(), true);
  data_src_diff_.Init(src_user, data_pd.diff_src_desc(), false);

  using WeightsDesc = dnnl::convolution_backward_weights::desc;
  dnnl::convolution_backward_weights::primitive_desc wgt_pd(
      bias_ ? WeightsDesc(algo, src_any, w_any, bias_md, dst_any, strides, dilates, pad_l, pad_r)
            : WeightsDesc(algo, src_any, w_any, dst_any, strides, dilates, pad_l, pad_r),
      eng, fwd_pd);
  bwd_weights_ = dnnl::convolution_backward_weights(wgt_pd);
  wgt_src_is_fwd_ = wgt_pd.src_desc() == fwd_pd.src_desc();
  if (!wgt_src_is_fwd_) wgt_src_.Init(src_user, wgt_pd.src_desc(), true);
  wgt_dst_diff_is_data_ = wgt_pd.diff_dst_desc() == data_pd.diff_dst_desc();
  if (!wgt_dst_diff_is_data_) wgt_dst_diff_.Init(dst_user, wgt_pd.diff_dst_desc(), true);
  weight_diff_prim_ = memory(wgt_pd.diff_weights_desc(), eng);
  weight_diff_user_ = memory(w_user, eng, nullptr);
  dnnl::post_ops accumulate;
  accumulate.append_sum(1.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(accumulate);
  add_weight_diff_ = dnnl::reorder(weight_diff_prim_, weight_diff_user_, attr);
  if (bias_) bias_diff_ = memory(bias_md, eng);
}

void ConvolutionLayer::DnnlConv::Forward(const float* src, const float* weights, const float* bias,
                                         float* dst) {
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, fwd_src_.In(src)},
                                          {DNNL_ARG_WEIGHTS, fwd_weights_.In(weights)},
                                          {DNNL_ARG_DST, fwd_dst_.Out(dst)}};
  if (bias_) {
    bias_mem_.set_data_handle(const_cast<float*>(bias));
    args[DNNL_ARG_BIAS] = bias_mem_;
  }
  fwd_.execute(DnnlStream(), args);
  fwd_dst_.Finish();
  DnnlStream().wait();
}

void ConvolutionLayer::DnnlConv::Backward(const float* src, const float* weights,
                                          const float* dst_diff, float* src_diff,
                                          float* weight_diff, float* bias_diff,
                                          bool src_as_forwarded) {
  dnnl::stream& stream = DnnlStream();
  const memory& dd = data_dst_diff_.In(dst_diff);
  if (src_diff != nullptr) {
    bwd_data_.execute(stream, {{DNNL_ARG_DIFF_DST, dd},
                               {DNNL_ARG_WEIGHTS, data_weights_.In(weights)},
                               {DNNL_ARG_DIFF_SRC, data_src_diff_.Out(src_diff)}});
    data_src_diff_.Finish();
  }
  if (weight_diff != nullptr || bias_diff != nullptr) {
    const bool reuse = src_as_forwarded && fwd_src_.reordered;
    const memory& s =
        wgt_src_is_fwd_ ? (reuse ? fwd_src_.prim : fwd_src_.In(src)) : wgt_src_.In(src);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, s},
        {DNNL_ARG_DIFF_DST, wgt_dst_diff_is_data_ ? dd : wgt_dst_diff_.In(dst_diff)},
        {DNNL_ARG_DIFF_WEIGHTS, weight_diff_prim_}};
    if (bias_) args[DNNL_ARG_DIFF_BIAS] = bias_diff_;
    bwd_weights_.execute(stream, args);
    if (weight_diff != nullptr) {
      weight_diff_user_.set_data_handle(weight_diff);
      add_weight_diff_.execute(stream, weight_diff_prim_, weight_diff_user_);
    }
    stream.wait();
    if (bias_diff != nullptr) {
      CpuAxpy(num_output_, 1.f, static_cast<const float*>(bias_diff_.get_data_handle()), bias_diff);
    }
  }
  stream.wait();
}

bool ConvolutionLayer::PrepareDnnl() {
  const int l = Layout();
  if (dnnl_[l] != nullptr) return true;
  if (dnnl_failed_[l]) return false;
  try {
    dnnl_[l].reset(
        new DnnlConv(geo_, num_, channels_, height_, width_, out_h_, out_w_, !PlainLayout()));
  } catch (const dnnl::error&) {
    dnnl_failed_[l] = true;  // e.g. an unsupported configuration: the reference path serves
  }
  return dnnl_[l] != nullptr;
}

void ConvolutionLayer::ForwardFast(const BlobVec& bottom, const BlobVec& top) {
  if (cpu_impl_ == CpuImpl::kWinograd) {
    const float* bias = geo_.bias_term ? blobs_[1]->cpu_data() : nullptr;
    for (size_t i = 0; i < bottom.size(); ++i) {
      PrepareWinograd().Forward(bottom[i]->cpu_data(), blobs_[0]->cpu_data(), bias,
                                top[i]->mutable_cpu_data());
    }
    return;
  }
  if (cpu_impl_ == CpuImpl::kReference || !PrepareDnnl()) return ForwardReference(bottom, top);
  const float* bias = geo_.bias_term ? blobs_[1]->cpu_data() : nullptr;
  for (size_t i = 0; i < bottom.size(); ++i) {
    dnnl_[Layout()]->Forward(bottom[i]->cpu_data(), blobs_[0]->cpu_data(), bias,
                             top[i]->mutable_cpu_data());
  }
}

void ConvolutionLayer::BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (cpu_impl_ == CpuImpl::kWinograd) {
    float* weight_diff = param_propagate_down(0) ? blobs_[0]->mutable_cpu_diff() : nullptr;
    float* bias_diff =
        geo_.bias_term && param_propagate_down(1) ? blobs_[1]->mutable_cpu_diff() : nullptr;
    // Last bottom first: the transformed input kept from the forward is the last bottom's.
    for (size_t i = top.size(); i-- > 0;) {
      PrepareWinograd().Backward(bottom[i]->cpu_data(), blobs_[0]->cpu_data(), top[i]->cpu_diff(),
                                 propagate_down[i] ? bottom[i]->mutable_cpu_diff() : nullptr,
                                 weight_diff, bias_diff, i + 1 == bottom.size());
    }
    return;
  }
  if (cpu_impl_ == CpuImpl::kReference || !PrepareDnnl()) {
    return BackwardReference(top, propagate_down, bottom);
  }
  float* weight_diff = param_propagate_down(0) ? blobs_[0]->mutable_cpu_diff() : nullptr;
  float* bias_diff =
      geo_.bias_term && param_propagate_down(1) ? blobs_[1]->mutable_cpu_diff() : nullptr;
  const bool gemm_wgrad =
      cpu_impl_ == CpuImpl::kOnednnBlockedGemmWgrad || cpu_impl_ == CpuImpl::kOnednnGemmWgrad;
  // Last bottom first: the forward's reordered src holds the last bottom forwarded.
  for (size_t i = top.size(); i-- > 0;) {
    const bool src_as_forwarded = i + 1 == bottom.size();
    if (gemm_wgrad && (weight_diff != nullptr || bias_diff != nullptr)) {
      WeightGradientReference(bottom[i]->cpu_data(), top[i]->cpu_diff(), weight_diff, bias_diff);
    }
    float* src_diff = propagate_down[i] ? bottom[i]->mutable_cpu_diff() : nullptr;
    if (gemm_wgrad && src_diff == nullptr) continue;
    dnnl_[Layout()]->Backward(bottom[i]->cpu_data(), blobs_[0]->cpu_data(), top[i]->cpu_diff(),
                              src_diff, gemm_wgrad ? nullptr : weight_diff,
                              gemm_wgrad ? nullptr : bias_diff, src_as_forwarded);
  }
}

}  // namespace pstrain

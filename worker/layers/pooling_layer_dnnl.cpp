// Pooling's "onednn" implementation: oneDNN pooling on the blobs' NCHW memory
// (no reorders), with the workspace for MAX backward. Configurations oneDNN
// cannot express exactly are not offered (pooling_layer.cpp).
#include <algorithm>
#include <unordered_map>

#include "common/dnnl_context.hpp"
#include "worker/layers/pooling_layer.hpp"

namespace pstrain {
namespace {

// The right padding under which oneDNN's (floor) size rule yields `out` windows,
// before clamping to >= 0.
int RightPad(int in, int pad, int kernel, int stride, int out) {
  return (out - 1) * stride + kernel - in - pad;
}

}  // namespace

class PoolingLayer::DnnlPool {
 public:
  // Throws dnnl::error when oneDNN cannot run the configuration.
  DnnlPool(dnnl::algorithm algo, const dnnl::memory::dims& src_dims,
           const dnnl::memory::dims& dst_dims, const dnnl::memory::dims& kernel,
           const dnnl::memory::dims& strides, const dnnl::memory::dims& pad_l,
           const dnnl::memory::dims& pad_r) {
    using dnnl::memory;
    const auto f32 = memory::data_type::f32;
    const memory::desc src_md(src_dims, f32, memory::format_tag::nchw);
    const memory::desc dst_md(dst_dims, f32, memory::format_tag::nchw);
    dnnl::engine& eng = DnnlEngine();
    dnnl::pooling_forward::primitive_desc fwd_pd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, algo, src_md, dst_md,
                                    strides, kernel, pad_l, pad_r),
        eng);
    dnnl::pooling_backward::primitive_desc bwd_pd(
        dnnl::pooling_backward::desc(algo, src_md, dst_md, strides, kernel, pad_l, pad_r), eng,
        fwd_pd);
    fwd_ = dnnl::pooling_forward(fwd_pd);
    bwd_ = dnnl::pooling_backward(bwd_pd);
    src_ = memory(src_md, eng, nullptr);
    dst_ = memory(dst_md, eng, nullptr);
    has_workspace_ = fwd_pd.workspace_desc().get_size() > 0;
    if (has_workspace_) workspace_ = memory(fwd_pd.workspace_desc(), eng);
  }

  void Forward(const float* src, float* dst) {
    src_.set_data_handle(const_cast<float*>(src));
    dst_.set_data_handle(dst);
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}};
    if (has_workspace_) args[DNNL_ARG_WORKSPACE] = workspace_;
    fwd_.execute(DnnlStream(), args);
    DnnlStream().wait();
  }

  // REQUIRES: Forward ran on the same bottom (MAX reads its workspace).
  void Backward(const float* dst_diff, float* src_diff) {
    dst_.set_data_handle(const_cast<float*>(dst_diff));
    src_.set_data_handle(src_diff);
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_DIFF_DST, dst_},
                                                  {DNNL_ARG_DIFF_SRC, src_}};
    if (has_workspace_) args[DNNL_ARG_WORKSPACE] = workspace_;
    bwd_.execute(DnnlStream(), args);
    DnnlStream().wait();
  }

 private:
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward bwd_;
  dnnl::memory src_, dst_, workspace_;
  bool has_workspace_ = false;
};

void PoolingLayer::DnnlPoolDeleter::operator()(DnnlPool* pool) const { delete pool; }

bool PoolingLayer::DnnlExpressible() const {
  if (num_tops_ > 1) return false;  // the mask top is Caffe's format
  if (max_ || (pad_h_ == 0 && pad_w_ == 0)) return true;
  // Caffe divides by the window clipped to [-pad, in + pad). Without padding
  // that is the in-input count (exclude_padding); with padding it is the
  // whole kernel (include_padding) as long as no window runs past in + pad.
  return RightPad(height_, pad_h_, kernel_h_, stride_h_, pooled_h_) <= pad_h_ &&
         RightPad(width_, pad_w_, kernel_w_, stride_w_, pooled_w_) <= pad_w_;
}

bool PoolingLayer::PrepareDnnl(size_t num_tops) {
  if (num_tops > 1) return false;
  if (dnnl_ != nullptr) return true;
  if (dnnl_unusable_) return false;
  if (!DnnlExpressible()) {
    dnnl_unusable_ = true;
    return false;
  }
  const int exact_r_h = RightPad(height_, pad_h_, kernel_h_, stride_h_, pooled_h_);
  const int exact_r_w = RightPad(width_, pad_w_, kernel_w_, stride_w_, pooled_w_);
  dnnl::algorithm algo = dnnl::algorithm::pooling_max;
  if (!max_) {
    algo = pad_h_ == 0 && pad_w_ == 0 ? dnnl::algorithm::pooling_avg_exclude_padding
                                      : dnnl::algorithm::pooling_avg_include_padding;
  }
  // A negative exact right padding is more than a stride short of another
  // window, so 0 gives the same count (floor division).
  try {
    dnnl_.reset(new DnnlPool(algo, dnnl::memory::dims{num_, channels_, height_, width_},
                             dnnl::memory::dims{num_, channels_, pooled_h_, pooled_w_},
                             dnnl::memory::dims{kernel_h_, kernel_w_},
                             dnnl::memory::dims{stride_h_, stride_w_},
                             dnnl::memory::dims{pad_h_, pad_w_},
                             dnnl::memory::dims{std::max(exact_r_h, 0), std::max(exact_r_w, 0)}));
  } catch (const dnnl::error&) {
    dnnl_unusable_ = true;
  }
  return dnnl_ != nullptr;
}

void PoolingLayer::ForwardDnnl(const BlobVec& bottom, const BlobVec& top) {
  dnnl_->Forward(bottom[0]->cpu_data(), top[0]->mutable_cpu_data());
}

void PoolingLayer::BackwardDnnl(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  dnnl_->Backward(top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff());
}

}  // namespace pstrain

// BatchNorm's fast path: oneDNN's batch_normalization primitives on the blob
// viewed as N x C x spatial x 1, built for a bottom shape and statistics mode
// and kept until either changes. The running statistics are folded in by the
// layer (batch_norm_layer.cpp), as on the reference path.
#include <memory>
#include <vector>

#include "common/dnnl_context.hpp"
#include "common/math_cpu.hpp"
#include "worker/layers/batch_norm_layer.hpp"

namespace pstrain {

struct BatchNormLayer::DnnlState {
  std::vector<int> shape;
  bool global = false;
  dnnl::memory::desc data_desc;
  dnnl::memory::desc stat_desc;
  dnnl::batch_normalization_forward forward;
  dnnl::batch_normalization_backward backward;
};

void BatchNormLayer::DnnlStateDeleter::operator()(DnnlState* state) const { delete state; }

void BatchNormLayer::BuildDnnl(const Blob& bottom) {
  using dnnl::memory;
  std::unique_ptr<DnnlState, DnnlStateDeleter> state(new DnnlState);
  state->shape = bottom.shape();
  state->global = use_global_stats_;
  state->data_desc = memory::desc({num_, channels_, spatial_, 1}, memory::data_type::f32,
                                  memory::format_tag::nchw);
  state->stat_desc = memory::desc({channels_}, memory::data_type::f32, memory::format_tag::a);
  const auto flags = use_global_stats_ ? dnnl::normalization_flags::use_global_stats
                                       : dnnl::normalization_flags::none;
  dnnl::batch_normalization_forward::desc forward_desc(dnnl::prop_kind::forward_training,
                                                       state->data_desc, eps_, flags);
  dnnl::batch_normalization_forward::primitive_desc forward_pd(forward_desc, DnnlEngine());
  state->forward = dnnl::batch_normalization_forward(forward_pd);
  dnnl::batch_normalization_backward::desc backward_desc(
      dnnl::prop_kind::backward_data, state->data_desc, state->data_desc, eps_, flags);
  dnnl::batch_normalization_backward::primitive_desc backward_pd(backward_desc, DnnlEngine(),
                                                                 forward_pd);
  state->backward = dnnl::batch_normalization_backward(backward_pd);
  dnnl_ = std::move(state);
}

void BatchNormLayer::ForwardFast(const BlobVec& bottom, const BlobVec& top) {
  if (fused_scale_ != nullptr) return ForwardFused(bottom, top);
  if (bottom[0]->count() == 0) return ForwardReference(bottom, top);
  if (!dnnl_ || dnnl_->shape != bottom[0]->shape() || dnnl_->global != use_global_stats_) {
    BuildDnnl(*bottom[0]);
  }
  using dnnl::memory;
  const float* x = bottom[0]->cpu_data();
  if (bottom[0] == top[0]) {  // keep the input for Backward
    CpuCopy(bottom[0]->count(), x, x_norm_.mutable_cpu_data());
    x = x_norm_.cpu_data();
  }
  if (use_global_stats_) LoadGlobalStats();
  memory src(dnnl_->data_desc, DnnlEngine(), const_cast<float*>(x));
  memory dst(dnnl_->data_desc, DnnlEngine(), top[0]->mutable_cpu_data());
  memory mean(dnnl_->stat_desc, DnnlEngine(), mean_.mutable_cpu_data());
  memory variance(dnnl_->stat_desc, DnnlEngine(), variance_.mutable_cpu_data());
  dnnl_->forward.execute(DnnlStream(), {{DNNL_ARG_SRC, src},
                                        {DNNL_ARG_DST, dst},
                                        {DNNL_ARG_MEAN, mean},
                                        {DNNL_ARG_VARIANCE, variance}});
  DnnlStream().wait();
  // oneDNN's variance output is the biased one, as UpdateRunningStats expects.
  if (!use_global_stats_) UpdateRunningStats();
  ComputeStd();
}

// REQUIRES: ForwardFast ran last on these blobs (mean_, variance_ and the
// saved input are its).
void BatchNormLayer::BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                                  const BlobVec& bottom) {
  if (fused_scale_ != nullptr) return BackwardFusedSlot(propagate_down);
  if (!propagate_down[0]) return;
  if (bottom[0]->count() == 0) return;
  using dnnl::memory;
  const bool in_place = bottom[0] == top[0];
  const float* x = in_place ? x_norm_.cpu_data() : bottom[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  if (in_place) {
    CpuCopy(top[0]->count(), dy, x_norm_.mutable_cpu_diff());
    dy = x_norm_.cpu_diff();
  }
  memory src(dnnl_->data_desc, DnnlEngine(), const_cast<float*>(x));
  memory diff_dst(dnnl_->data_desc, DnnlEngine(), const_cast<float*>(dy));
  memory diff_src(dnnl_->data_desc, DnnlEngine(), bottom[0]->mutable_cpu_diff());
  memory mean(dnnl_->stat_desc, DnnlEngine(), mean_.mutable_cpu_data());
  memory variance(dnnl_->stat_desc, DnnlEngine(), variance_.mutable_cpu_data());
  dnnl_->backward.execute(DnnlStream(), {{DNNL_ARG_SRC, src},
                                         {DNNL_ARG_DIFF_DST, diff_dst},
                                         {DNNL_ARG_DIFF_SRC, diff_src},
                                         {DNNL_ARG_MEAN, mean},
                                         {DNNL_ARG_VARIANCE, variance}});
  DnnlStream().wait();
}

}  // namespace pstrain

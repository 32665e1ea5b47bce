// LRN's "onednn" implementation: oneDNN's lrn primitives on the blobs' NCHW memory, built
// for a bottom shape and kept until it changes. oneDNN's window and alpha
// conventions are Caffe's (lrn_layer.hpp), so the reference path
// (lrn_layer.cpp) and this one agree.
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/dnnl_context.hpp"
#include "worker/layers/lrn_layer.hpp"

namespace pstrain {

struct LrnLayer::DnnlState {
  std::vector<int> shape;
  dnnl::memory::desc data_desc;
  dnnl::lrn_forward::primitive_desc forward_pd;
  dnnl::lrn_forward forward;
  dnnl::lrn_backward backward;
  dnnl::memory workspace;  // empty when the implementation needs none
};

void LrnLayer::DnnlStateDeleter::operator()(DnnlState* state) const { delete state; }

void LrnLayer::BuildDnnl(const Blob& bottom) {
  using dnnl::memory;
  std::unique_ptr<DnnlState, DnnlStateDeleter> state(new DnnlState);
  state->shape = bottom.shape();
  state->data_desc = memory::desc({num_, channels_, height_, width_}, memory::data_type::f32,
                                  memory::format_tag::nchw);
  const auto algorithm =
      across_ ? dnnl::algorithm::lrn_across_channels : dnnl::algorithm::lrn_within_channel;
  // oneDNN divides alpha by n (across) or n^2 (within) itself: pass Caffe's alpha.
  const float alpha = layer_param().lrn_param().alpha();
  dnnl::lrn_forward::desc forward_desc(dnnl::prop_kind::forward_training, algorithm,
                                       state->data_desc, size_, alpha, beta_, k_);
  state->forward_pd = dnnl::lrn_forward::primitive_desc(forward_desc, DnnlEngine());
  state->forward = dnnl::lrn_forward(state->forward_pd);
  dnnl::lrn_backward::desc backward_desc(algorithm, state->data_desc, state->data_desc, size_,
                                         alpha, beta_, k_);
  dnnl::lrn_backward::primitive_desc backward_pd(backward_desc, DnnlEngine(), state->forward_pd);
  state->backward = dnnl::lrn_backward(backward_pd);
  if (state->forward_pd.workspace_desc().get_size() > 0) {
    state->workspace = memory(state->forward_pd.workspace_desc(), DnnlEngine());
  }
  dnnl_ = std::move(state);
}

void LrnLayer::ForwardDnnl(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->count() == 0) return;
  if (!dnnl_ || dnnl_->shape != bottom[0]->shape()) BuildDnnl(*bottom[0]);
  using dnnl::memory;
  memory src(dnnl_->data_desc, DnnlEngine(), const_cast<float*>(bottom[0]->cpu_data()));
  memory dst(dnnl_->data_desc, DnnlEngine(), top[0]->mutable_cpu_data());
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  if (dnnl_->workspace) args[DNNL_ARG_WORKSPACE] = dnnl_->workspace;
  dnnl_->forward.execute(DnnlStream(), args);
  DnnlStream().wait();
}

// REQUIRES: ForwardDnnl ran last on these blobs (the workspace is its own).
void LrnLayer::BackwardDnnl(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0] || bottom[0]->count() == 0) return;
  using dnnl::memory;
  memory src(dnnl_->data_desc, DnnlEngine(), const_cast<float*>(bottom[0]->cpu_data()));
  memory diff_dst(dnnl_->data_desc, DnnlEngine(), const_cast<float*>(top[0]->cpu_diff()));
  memory diff_src(dnnl_->data_desc, DnnlEngine(), bottom[0]->mutable_cpu_diff());
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}};
  if (dnnl_->workspace) args[DNNL_ARG_WORKSPACE] = dnnl_->workspace;
  dnnl_->backward.execute(DnnlStream(), args);
  DnnlStream().wait();
}

}  // namespace pstrain

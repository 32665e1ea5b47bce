#include "worker/layers/im2col_layer.hpp"

#include <string>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status Im2colLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const caffe::ConvolutionParameter& p = param_.convolution_param();
  const Blob& x = *bottom[0];
  if (p.axis() < -x.num_axes() || p.axis() >= x.num_axes() || x.CanonicalAxisIndex(p.axis()) != 1) {
    return Status::Error("Im2col supports only axis 1 (channels), got axis " +
                         std::to_string(p.axis()));
  }
  if (x.num_axes() != 4) {
    return Status::Error("bottom 0 has " + std::to_string(x.num_axes()) +
                         " axes; only 2-D im2col (N, C, H, W) is supported");
  }
  caffe::LayerParameter select;
  select.set_name(name() + " (selecting convolution)");
  select.set_type("Convolution");
  caffe::ConvolutionParameter* sp = select.mutable_convolution_param();
  *sp = p;
  sp->set_num_output(1);
  sp->clear_group();
  ConvGeometry g;
  PSTRAIN_RETURN_IF_ERROR(ParseConvGeometry(*sp, &g));
  const int channels = x.shape(1);
  const int window = g.kernel_h * g.kernel_w;
  if (channels < 1) return Status::Error("bottom 0 has no channels: " + x.shape_string());
  sp->set_num_output(channels * window);
  sp->set_group(channels);
  sp->set_bias_term(false);
  sp->clear_weight_filler();
  sp->clear_bias_filler();
  select_ = std::make_unique<ConvolutionLayer>(select);
  select_->set_context(context());
  select_->set_engine(engine());
  PSTRAIN_RETURN_IF_ERROR(select_->SetUp(bottom, top));
  select_->set_param_propagate_down(0, false);
  // Output k = c window + o of group c reads its one input channel at offset o.
  Blob& w = *select_->blobs()[0];  // (C window, 1, kh, kw)
  float* wd = w.mutable_cpu_data();
  for (int64_t i = 0; i < w.count(); ++i) wd[i] = (i / window) % window == i % window ? 1.f : 0.f;
  return Status::Ok();
}

Status Im2colLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (!select_) return Status::Ok();  // LayerSetUp has just shaped the top
  select_->set_engine(engine());
  return select_->Reshape(bottom, top);
}

void Im2colLayer::RunForward(Engine engine, const BlobVec& bottom, const BlobVec& top) {
  select_->set_engine(engine);
  select_->Forward(bottom, top);
}

void Im2colLayer::RunBackward(Engine engine, const BlobVec& top,
                              const std::vector<bool>& propagate_down, const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  select_->set_engine(engine);
  select_->Backward(top, propagate_down, bottom);
}

void Im2colLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  RunForward(Engine::kReference, bottom, top);
}
void Im2colLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  RunBackward(Engine::kReference, top, propagate_down, bottom);
}
void Im2colLayer::ForwardFast(const BlobVec& bottom, const BlobVec& top) {
  RunForward(Engine::kFast, bottom, top);
}
void Im2colLayer::BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  RunBackward(Engine::kFast, top, propagate_down, bottom);
}

PSTRAIN_REGISTER_LAYER("Im2col", Im2colLayer);

}  // namespace pstrain

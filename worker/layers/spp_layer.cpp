#include "worker/layers/spp_layer.hpp"

#include <cmath>
#include <string>

#include "worker/layer_registry.hpp"
#include "worker/layers/concat_layer.hpp"
#include "worker/layers/flatten_layer.hpp"
#include "worker/layers/pooling_layer.hpp"
#include "worker/layers/split_layer.hpp"

namespace pstrain {
namespace {

// Caffe's SPPLayer::GetPoolingParam for `level`.
caffe::LayerParameter LevelPooling(const std::string& name, int level, int height, int width,
                                   caffe::SPPParameter::PoolMethod pool) {
  caffe::LayerParameter p;
  p.set_name(name + "/level " + std::to_string(level) + " pooling");
  p.set_type("Pooling");
  const int bins = 1 << level;
  const int kernel_h = (height + bins - 1) / bins;
  const int kernel_w = (width + bins - 1) / bins;
  caffe::PoolingParameter* pp = p.mutable_pooling_param();
  pp->set_kernel_h(kernel_h);
  pp->set_kernel_w(kernel_w);
  pp->set_stride_h(kernel_h);
  pp->set_stride_w(kernel_w);
  pp->set_pad_h((kernel_h * bins - height + 1) / 2);
  pp->set_pad_w((kernel_w * bins - width + 1) / 2);
  pp->set_pool(pool == caffe::SPPParameter::AVE ? caffe::PoolingParameter::AVE
                                                : caffe::PoolingParameter::MAX);
  return p;
}

caffe::LayerParameter Inner(const std::string& name, const char* type) {
  caffe::LayerParameter p;
  p.set_name(name + "/" + type);
  p.set_type(type);
  return p;
}

}  // namespace

SPPLayer::SPPLayer(const caffe::LayerParameter& param) : Layer(param) {}
SPPLayer::~SPPLayer() = default;

Status SPPLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const caffe::SPPParameter& p = param_.spp_param();
  if (p.pyramid_height() < 1 || p.pyramid_height() > 30) {
    return Status::Error("spp_param.pyramid_height must be set and in [1, 30], got " +
                         (p.has_pyramid_height() ? std::to_string(p.pyramid_height()) : "none"));
  }
  if (p.pool() == caffe::SPPParameter::STOCHASTIC) {
    return Status::Error("spp_param.pool: STOCHASTIC is not supported (only MAX and AVE)");
  }
  return Build(bottom, top);
}

Status SPPLayer::Build(const BlobVec& bottom, const BlobVec& top) {
  const Blob& x = *bottom[0];
  if (x.num_axes() != 4 || x.shape(2) < 1 || x.shape(3) < 1) {
    return Status::Error("SPP needs a 4-D bottom (N, C, H, W) with H and W at least 1, got shape " +
                         x.shape_string());
  }
  steps_.clear();
  inner_blobs_.clear();
  height_ = x.shape(2);
  width_ = x.shape(3);
  const int levels = static_cast<int>(param_.spp_param().pyramid_height());
  const auto pool = param_.spp_param().pool();
  auto add = [&](caffe::LayerParameter lp, std::unique_ptr<Layer> layer, BlobVec b,
                 BlobVec t) -> Status {
    layer->set_context(context());
    layer->set_engine(engine());
    // The net names this layer; the context says which inner layer failed.
    PSTRAIN_RETURN_IF_ERROR(layer->SetUp(b, t).WithContext(lp.name().substr(name().size() + 1)));
    steps_.push_back({std::move(layer), std::move(b), std::move(t)});
    return Status::Ok();
  };
  auto blob = [&]() {
    inner_blobs_.push_back(std::make_unique<Blob>());
    return inner_blobs_.back().get();
  };
  if (levels == 1) {
    const caffe::LayerParameter lp = LevelPooling(name(), 0, height_, width_, pool);
    return add(lp, std::make_unique<PoolingLayer>(lp), bottom, top);
  }
  BlobVec split_tops, flat;
  for (int l = 0; l < levels; ++l) split_tops.push_back(blob());
  const caffe::LayerParameter split = Inner(name(), "Split");
  PSTRAIN_RETURN_IF_ERROR(add(split, std::make_unique<SplitLayer>(split), bottom, split_tops));
  for (int l = 0; l < levels; ++l) {
    const caffe::LayerParameter lp = LevelPooling(name(), l, height_, width_, pool);
    Blob* pooled = blob();
    PSTRAIN_RETURN_IF_ERROR(add(lp, std::make_unique<PoolingLayer>(lp), {split_tops[l]}, {pooled}));
    const caffe::LayerParameter fp = Inner(name(), "Flatten");
    flat.push_back(blob());
    PSTRAIN_RETURN_IF_ERROR(add(fp, std::make_unique<FlattenLayer>(fp), {pooled}, {flat.back()}));
  }
  const caffe::LayerParameter cp = Inner(name(), "Concat");
  return add(cp, std::make_unique<ConcatLayer>(cp), flat, top);
}

Status SPPLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& x = *bottom[0];
  if (x.num_axes() != 4 || x.shape(2) != height_ || x.shape(3) != width_) {
    return Build(bottom, top);
  }
  for (Step& s : steps_) {
    s.layer->set_engine(engine());
    PSTRAIN_RETURN_IF_ERROR(
        s.layer->Reshape(s.bottom, s.top).WithContext(s.layer->name().substr(name().size() + 1)));
  }
  return Status::Ok();
}

void SPPLayer::RunForward(Engine engine, const BlobVec& bottom, const BlobVec& top) {
  steps_.front().bottom = bottom;
  steps_.back().top = top;
  for (Step& s : steps_) {
    s.layer->set_engine(engine);
    s.layer->Forward(s.bottom, s.top);
  }
}

void SPPLayer::RunBackward(Engine engine, const BlobVec& top,
                           const std::vector<bool>& propagate_down, const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  steps_.front().bottom = bottom;
  steps_.back().top = top;
  for (auto s = steps_.rbegin(); s != steps_.rend(); ++s) {
    s->layer->set_engine(engine);
    s->layer->Backward(s->top, std::vector<bool>(s->bottom.size(), true), s->bottom);
  }
}

void SPPLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  RunForward(Engine::kReference, bottom, top);
}
void SPPLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  RunBackward(Engine::kReference, top, propagate_down, bottom);
}
void SPPLayer::ForwardFast(const BlobVec& bottom, const BlobVec& top) {
  RunForward(Engine::kFast, bottom, top);
}
void SPPLayer::BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  RunBackward(Engine::kFast, top, propagate_down, bottom);
}

PSTRAIN_REGISTER_LAYER("SPP", SPPLayer);

}  // namespace pstrain

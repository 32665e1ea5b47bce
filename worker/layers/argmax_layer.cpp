#include "worker/layers/argmax_layer.hpp"

#include <algorithm>
#include <functional>
#include <utility>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status ArgMaxLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const caffe::ArgMaxParameter& p = param_.argmax_param();
  const Blob& x = *bottom[0];
  if (p.top_k() < 1) return Status::Error("argmax_param.top_k must be at least 1, got 0");
  std::vector<int> shape;
  if (p.has_axis()) {
    if (p.axis() < -x.num_axes() || p.axis() >= x.num_axes()) {
      return Status::Error("argmax_param.axis " + std::to_string(p.axis()) +
                           " is out of range for bottom 0 of shape " + x.shape_string());
    }
    const int axis = x.CanonicalAxisIndex(p.axis());
    dim_ = x.shape(axis);
    stride_ = x.count(axis + 1);
    shape = x.shape();
    shape[axis] = static_cast<int>(std::min<uint32_t>(p.top_k(), 1u << 30));
  } else {
    if (x.num_axes() < 1) {
      return Status::Error("ArgMax needs a bottom with an axis 0, got shape " + x.shape_string());
    }
    dim_ = x.count(1);
    stride_ = 1;
    shape = {x.shape(0), p.out_max_val() ? 2 : 1,
             static_cast<int>(std::min<uint32_t>(p.top_k(), 1u << 30))};
  }
  if (p.top_k() > dim_) {
    return Status::Error("argmax_param.top_k " + std::to_string(p.top_k()) + " exceeds the " +
                         std::to_string(dim_) + " values each instance of bottom 0 (shape " +
                         x.shape_string() + ") has");
  }
  top_k_ = static_cast<int>(p.top_k());
  num_ = dim_ > 0 ? x.count() / dim_ : 0;
  top[0]->Reshape(shape);
  return Status::Ok();
}

void ArgMaxLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const bool values = param_.argmax_param().out_max_val();
  const bool has_axis = param_.argmax_param().has_axis();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  std::vector<std::pair<float, int64_t>> ranked(dim_);
  for (int64_t i = 0; i < num_; ++i) {
    const int64_t outer = i / stride_, inner = i % stride_;
    for (int64_t j = 0; j < dim_; ++j) ranked[j] = {x[(outer * dim_ + j) * stride_ + inner], j};
    std::partial_sort(ranked.begin(), ranked.begin() + top_k_, ranked.end(),
                      std::greater<std::pair<float, int64_t>>());
    for (int j = 0; j < top_k_; ++j) {
      const float index = static_cast<float>(ranked[j].second);
      if (has_axis) {
        y[(outer * top_k_ + j) * stride_ + inner] = values ? ranked[j].first : index;
      } else if (values) {
        y[2 * i * top_k_ + j] = index;
        y[2 * i * top_k_ + top_k_ + j] = ranked[j].first;
      } else {
        y[i * top_k_ + j] = index;
      }
    }
  }
}

PSTRAIN_REGISTER_LAYER("ArgMax", ArgMaxLayer);

}  // namespace pstrain

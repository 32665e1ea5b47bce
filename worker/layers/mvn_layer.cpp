#include "worker/layers/mvn_layer.hpp"

#include <cmath>
#include <sstream>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status MVNLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const caffe::MVNParameter& p = param_.mvn_param();
  const Blob& x = *bottom[0];
  if (!(p.eps() >= 0.f)) {
    std::ostringstream out;
    out << "mvn_param.eps must be non-negative, got " << p.eps();
    return Status::Error(out.str());
  }
  if (x.num_axes() > 4) {
    return Status::Error("MVN takes a bottom of at most 4 axes (num, channels, height, width), " +
                         std::string("got shape ") + x.shape_string());
  }
  top[0]->Reshape({x.num(), x.channels(), x.height(), x.width()});
  groups_ = p.across_channels() ? x.num() : static_cast<int64_t>(x.num()) * x.channels();
  dim_ = groups_ > 0 ? x.count() / groups_ : 0;
  mean_.Reshape({static_cast<int>(groups_)});
  scale_.Reshape({static_cast<int>(groups_)});
  sums_.Reshape({static_cast<int>(groups_), 2});
  return Status::Ok();
}

void MVNLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const caffe::MVNParameter& p = param_.mvn_param();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  float* mean = mean_.mutable_cpu_data();
  float* scale = scale_.mutable_cpu_data();
  for (int64_t g = 0; g < groups_; ++g) {
    const float* row = x + g * dim_;
    double sum = 0;
    for (int64_t j = 0; j < dim_; ++j) sum += row[j];
    const float m = static_cast<float>(sum / static_cast<double>(dim_));
    float s = 1.f;
    if (p.normalize_variance()) {
      double sq = 0;
      for (int64_t j = 0; j < dim_; ++j) sq += static_cast<double>(row[j] - m) * (row[j] - m);
      s = static_cast<float>(std::sqrt(sq / static_cast<double>(dim_))) + p.eps();
    }
    mean[g] = m;
    scale[g] = s;
    for (int64_t j = g * dim_; j < (g + 1) * dim_; ++j) {
      y[j] = p.normalize_variance() ? (x[j] - m) / s : x[j] - m;
    }
  }
}

void MVNLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const bool normalize = param_.mvn_param().normalize_variance();
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const float* scale = scale_.cpu_data();
  for (int64_t g = 0; g < groups_; ++g) {
    double sum_dy = 0, sum_dy_y = 0;
    for (int64_t j = g * dim_; j < (g + 1) * dim_; ++j) {
      sum_dy += dy[j];
      sum_dy_y += static_cast<double>(dy[j]) * y[j];
    }
    const float a = static_cast<float>(sum_dy / static_cast<double>(dim_));
    const float b = static_cast<float>(sum_dy_y / static_cast<double>(dim_));
    for (int64_t j = g * dim_; j < (g + 1) * dim_; ++j) {
      dx[j] = normalize ? (dy[j] - a - y[j] * b) / scale[g] : dy[j] - a;
    }
  }
}

PSTRAIN_REGISTER_LAYER("MVN", MVNLayer);

}  // namespace pstrain

#include "worker/layers/infogain_loss_layer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/proto_io.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {
constexpr float kLogThreshold = 1e-20f;  // Caffe's kLOG_THRESHOLD

Status CheckAxis(const Blob& scores, int axis) {
  if (axis < -scores.num_axes() || axis >= scores.num_axes()) {
    return Status::Error("infogain_loss_param.axis " + std::to_string(axis) +
                         " is out of range for bottom 0 of shape " + scores.shape_string());
  }
  return Status::Ok();
}
}  // namespace

Status InfogainLossLayer::LayerSetUp(const BlobVec& bottom, const BlobVec&) {
  const caffe::LossParameter& loss = param_.loss_param();
  normalization_ = NormalizationMode(loss);
  has_ignore_label_ = loss.has_ignore_label();
  ignore_label_ = loss.ignore_label();
  PSTRAIN_RETURN_IF_ERROR(CheckAxis(*bottom[0], param_.infogain_loss_param().axis()));
  caffe::LayerParameter softmax;
  softmax.set_name(name() + "/softmax");
  softmax.set_type("Softmax");
  softmax.mutable_softmax_param()->set_axis(param_.infogain_loss_param().axis());
  PSTRAIN_ASSIGN_OR_RETURN(softmax_, LayerRegistry::Global().Create(softmax));
  softmax_->set_context(context());
  PSTRAIN_RETURN_IF_ERROR(softmax_->SetUp({bottom[0]}, {&prob_}));
  if (bottom.size() > 2) return Status::Ok();
  const caffe::InfogainLossParameter& p = param_.infogain_loss_param();
  if (!p.has_source()) {
    return Status::Error(
        "InfogainLoss needs the matrix H: infogain_loss_param.source or a third bottom");
  }
  caffe::BlobProto proto;
  Status read = ReadBinaryProto(p.source(), &proto);
  if (!read.ok()) return Status::Error("infogain_loss_param.source: " + read.message());
  return infogain_.FromProto(proto, /*reshape=*/true);
}

Status InfogainLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_RETURN_IF_ERROR(LossLayer::Reshape(bottom, top));
  PSTRAIN_RETURN_IF_ERROR(CheckAxis(*bottom[0], param_.infogain_loss_param().axis()));
  const Blob& scores = *bottom[0];
  const int axis = param_.infogain_loss_param().axis();
  PSTRAIN_RETURN_IF_ERROR(softmax_->Reshape({bottom[0]}, {&prob_}));
  const int canonical = scores.CanonicalAxisIndex(axis);
  outer_ = scores.count(0, canonical);
  inner_ = scores.count(canonical + 1);
  classes_ = scores.shape(canonical);
  if (outer_ * inner_ != bottom[1]->count()) {
    return Status::Error("number of labels must match number of predictions: bottom 0 of shape " +
                         scores.shape_string() + " with axis " + std::to_string(canonical) +
                         " needs " + std::to_string(outer_ * inner_) +
                         " labels, but bottom 1 has shape " + bottom[1]->shape_string());
  }
  const Blob& h = Infogain(bottom);
  if (h.count() != static_cast<int64_t>(classes_) * classes_) {
    return Status::Error("the infogain matrix H (" + h.shape_string() + ") must be " +
                         std::to_string(classes_) + " x " + std::to_string(classes_) +
                         " for the classes of bottom 0 " + scores.shape_string());
  }
  row_sums_.Reshape({classes_});
  counted_.assign(static_cast<size_t>(outer_ * inner_), 0.f);
  counted_blob_.Reshape({static_cast<int>(outer_ * inner_)});
  if (top.size() >= 2) top[1]->ReshapeLike(scores);
  return Status::Ok();
}

void InfogainLossLayer::Prepare(const BlobVec& bottom) {
  softmax_->set_engine(engine());
  softmax_->Forward({bottom[0]}, {&prob_});
  const float* h = Infogain(bottom).cpu_data();
  float* sums = row_sums_.mutable_cpu_data();
  for (int k = 0; k < classes_; ++k) {
    double sum = 0;
    for (int l = 0; l < classes_; ++l) sum += h[k * classes_ + l];
    sums[k] = static_cast<float>(sum);
  }
  const float* label = bottom[1]->cpu_data();
  last_error_ = Status::Ok();
  int64_t valid = 0;
  for (int64_t i = 0; i < outer_ * inner_; ++i) {
    counted_[i] = 0.f;
    int value = 0;
    const bool readable = ReadLabel(label[i], &value);
    if (readable && has_ignore_label_ && value == ignore_label_) continue;
    if (!readable || value < 0 || value >= classes_) {
      if (last_error_.ok()) {
        last_error_ = Status::Error(LabelOutOfRangeMessage(label[i], i, classes_));
      }
      continue;
    }
    counted_[i] = 1.f;
    ++valid;
  }
  normalizer_ = LossNormalizer(normalization_, outer_, inner_, valid);
}

void InfogainLossLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  Prepare(bottom);
  const float* prob = prob_.cpu_data();
  const float* h = Infogain(bottom).cpu_data();
  const float* label = bottom[1]->cpu_data();
  double loss = 0;
  for (int64_t i = 0; i < outer_; ++i) {
    for (int64_t j = 0; j < inner_; ++j) {
      if (counted_[i * inner_ + j] == 0.f) continue;
      const float* row = h + static_cast<int64_t>(label[i * inner_ + j]) * classes_;
      const float* p = prob + i * classes_ * inner_ + j;
      for (int l = 0; l < classes_; ++l) {
        loss -= static_cast<double>(row[l]) * std::log(std::max(p[l * inner_], kLogThreshold));
      }
    }
  }
  top[0]->mutable_cpu_data()[0] = last_error_.ok() ? static_cast<float>(loss / normalizer_)
                                                   : std::numeric_limits<float>::quiet_NaN();
  if (top.size() == 2) top[1]->CopyFrom(prob_);
}

void InfogainLossLayer::BackwardReference(const BlobVec& top,
                                          const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;  // labels and H take no gradient
  const float scale = top[0]->cpu_diff()[0] / normalizer_;
  const float* prob = prob_.cpu_data();
  const float* h = Infogain(bottom).cpu_data();
  const float* sums = row_sums_.cpu_data();
  const float* label = bottom[1]->cpu_data();
  float* diff = bottom[0]->mutable_cpu_diff();
  for (int64_t i = 0; i < outer_; ++i) {
    for (int64_t j = 0; j < inner_; ++j) {
      float* d = diff + i * classes_ * inner_ + j;
      if (counted_[i * inner_ + j] == 0.f) {
        for (int l = 0; l < classes_; ++l) d[l * inner_] = 0.f;
        continue;
      }
      const int k = static_cast<int>(label[i * inner_ + j]);
      const float* p = prob + i * classes_ * inner_ + j;
      for (int l = 0; l < classes_; ++l) {
        d[l * inner_] = scale * (p[l * inner_] * sums[k] - h[k * classes_ + l]);
      }
    }
  }
}

PSTRAIN_REGISTER_LAYER("InfogainLoss", InfogainLossLayer);

}  // namespace pstrain

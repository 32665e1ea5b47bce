#include "worker/layer.hpp"

#include <algorithm>

#include "common/math_cpu.hpp"

namespace pstrain {

Layer::Layer(const caffe::LayerParameter& param) : param_(param) {}

Status Layer::LayerSetUp(const BlobVec&, const BlobVec&) { return Status::Ok(); }

static std::string Count(int n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

Status Layer::CheckBlobCounts(const BlobVec& bottom, const BlobVec& top) const {
  const int nb = static_cast<int>(bottom.size());
  const int nt = static_cast<int>(top.size());
  const std::string t = std::string(type()) + " layer ";
  if (ExactNumBottomBlobs() >= 0 && nb != ExactNumBottomBlobs()) {
    return Status::Error(t + "takes " + Count(ExactNumBottomBlobs(), "bottom") + ", got " +
                         std::to_string(nb));
  }
  if (MinBottomBlobs() >= 0 && nb < MinBottomBlobs()) {
    return Status::Error(t + "takes at least " + Count(MinBottomBlobs(), "bottom") + ", got " +
                         std::to_string(nb));
  }
  if (MaxBottomBlobs() >= 0 && nb > MaxBottomBlobs()) {
    return Status::Error(t + "takes at most " + Count(MaxBottomBlobs(), "bottom") + ", got " +
                         std::to_string(nb));
  }
  if (ExactNumTopBlobs() >= 0 && nt != ExactNumTopBlobs()) {
    return Status::Error(t + "produces " + Count(ExactNumTopBlobs(), "top") + ", got " +
                         std::to_string(nt));
  }
  if (MinTopBlobs() >= 0 && nt < MinTopBlobs()) {
    return Status::Error(t + "produces at least " + Count(MinTopBlobs(), "top") + ", got " +
                         std::to_string(nt));
  }
  if (MaxTopBlobs() >= 0 && nt > MaxTopBlobs()) {
    return Status::Error(t + "produces at most " + Count(MaxTopBlobs(), "top") + ", got " +
                         std::to_string(nt));
  }
  if (EqualNumBottomTopBlobs() && nb != nt) {
    return Status::Error(t + "needs as many tops as bottoms, got " + std::to_string(nb) +
                         " bottoms and " + std::to_string(nt) + " tops");
  }
  return Status::Ok();
}

Status Layer::SetUp(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_RETURN_IF_ERROR(CheckBlobCounts(bottom, top));
  PSTRAIN_RETURN_IF_ERROR(LayerSetUp(bottom, top));
  PSTRAIN_RETURN_IF_ERROR(Reshape(bottom, top));
  return SetLossWeights(top);
}

Status Layer::SetLossWeights(const BlobVec& top) {
  loss_.assign(top.size(), 0.f);
  const int n = param_.loss_weight_size();
  if (n > 0 && n != static_cast<int>(top.size())) {
    return Status::Error("loss_weight must be given once per top (" + std::to_string(top.size()) +
                         "), got " + std::to_string(n));
  }
  for (size_t i = 0; i < top.size(); ++i) {
    float w = n > 0 ? param_.loss_weight(static_cast<int>(i)) : (IsLoss() && i == 0 ? 1.f : 0.f);
    loss_[i] = w;
    if (w != 0.f) CpuSet(top[i]->count(), w, top[i]->mutable_cpu_diff());
  }
  return Status::Ok();
}

float Layer::Forward(const BlobVec& bottom, const BlobVec& top) {
  switch (engine_) {
    case Engine::kReference:
      ForwardReference(bottom, top);
      break;
    case Engine::kFast:
      if (fast_runs_reference_) {
        ForwardReference(bottom, top);
      } else {
        ForwardFast(bottom, top);
      }
      break;
    case Engine::kGpu:
      ForwardGpu(bottom, top);
      break;
  }
  // Only loss tops are read back (on the host; one sync for a GPU loss).
  float loss = 0.f;
  for (size_t i = 0; i < top.size(); ++i) {
    if (loss_[i] == 0.f) continue;
    double sum = 0;
    const float* data = top[i]->cpu_data();
    for (int64_t j = 0; j < top[i]->count(); ++j) sum += data[j];
    loss += loss_[i] * static_cast<float>(sum);
  }
  return loss;
}

void Layer::Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                     const BlobVec& bottom) {
  switch (engine_) {
    case Engine::kReference:
      BackwardReference(top, propagate_down, bottom);
      break;
    case Engine::kFast:
      if (fast_runs_reference_) {
        BackwardReference(top, propagate_down, bottom);
      } else {
        BackwardFast(top, propagate_down, bottom);
      }
      break;
    case Engine::kGpu:
      BackwardGpu(top, propagate_down, bottom);
      break;
  }
}

std::vector<std::string> Layer::CpuImplementations() const {
  if (fused_) return {"fused"};
  if (!HasFastPath()) return {"reference"};
  return {"fast", "reference"};
}

Status Layer::SelectCpuImplementation(const std::string& name) {
  std::vector<std::string> names = CpuImplementations();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string choices;
    for (const std::string& n : names) choices += (choices.empty() ? "" : ", ") + n;
    return Status::Error("layer " + this->name() + " (" + type() + ") has no CPU implementation '" +
                         name + "' (choices: " + choices + ")");
  }
  fast_runs_reference_ = name == "reference" && HasFastPath();
  return Status::Ok();
}

std::string Layer::CpuImplementation() const {
  if (fused_) return "fused";
  if (!HasFastPath() || fast_runs_reference_) return "reference";
  return "fast";
}

std::string Layer::Implementation() const {
  switch (engine_) {
    case Engine::kReference:
      return "reference";
    case Engine::kGpu:
      if (HasGpuPath()) return GpuImplementation();
      return CpuImplementation();
    case Engine::kFast:
      break;
  }
  return CpuImplementation();
}

float Layer::loss(int top_index) const {
  return top_index < static_cast<int>(loss_.size()) ? loss_[top_index] : 0.f;
}

void Layer::set_loss(int top_index, float weight) {
  if (top_index >= static_cast<int>(loss_.size())) loss_.resize(top_index + 1, 0.f);
  loss_[top_index] = weight;
}

bool Layer::param_propagate_down(int param_id) const {
  return param_id >= static_cast<int>(param_propagate_down_.size()) ||
         param_propagate_down_[param_id];
}

void Layer::set_param_propagate_down(int param_id, bool value) {
  if (param_id >= static_cast<int>(param_propagate_down_.size())) {
    param_propagate_down_.resize(param_id + 1, true);
  }
  param_propagate_down_[param_id] = value;
}

}  // namespace pstrain

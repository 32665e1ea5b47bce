#include "worker/layers/eltwise_layer.hpp"

#include <algorithm>
#include <string>

#include "common/math_cpu.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status EltwiseLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& /*top*/) {
  const caffe::EltwiseParameter& p = param_.eltwise_param();
  op_ = p.operation();
  stable_prod_grad_ = p.stable_prod_grad();
  if (p.coeff_size() > 0 && p.coeff_size() != static_cast<int>(bottom.size())) {
    return Status::Error("Eltwise takes one coeff per bottom: " + std::to_string(bottom.size()) +
                         " bottoms, " + std::to_string(p.coeff_size()) + " coeffs");
  }
  // As in Caffe, MAX ignores coeffs but PROD rejects them.
  if (p.coeff_size() > 0 && op_ == caffe::EltwiseParameter::PROD) {
    return Status::Error("Eltwise takes coeff only for SUM, not PROD");
  }
  coeffs_.assign(bottom.size(), 1.f);
  for (int i = 0; i < p.coeff_size(); ++i) coeffs_[i] = p.coeff(i);
  return Status::Ok();
}

Status EltwiseLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (size_t i = 1; i < bottom.size(); ++i) {
    if (bottom[i]->shape() != bottom[0]->shape()) {
      return Status::Error("bottom " + std::to_string(i) + " has shape " +
                           bottom[i]->shape_string() + ", bottom 0 has " +
                           bottom[0]->shape_string() + "; Eltwise needs equal shapes");
    }
  }
  top[0]->ReshapeLike(*bottom[0]);
  if (op_ == caffe::EltwiseParameter::MAX) max_index_.resize(bottom[0]->count());
  return Status::Ok();
}

void EltwiseLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = top[0]->count();
  float* y = top[0]->mutable_cpu_data();
  switch (op_) {
    case caffe::EltwiseParameter::PROD: {
      const float* a = bottom[0]->cpu_data();
      const float* b = bottom[1]->cpu_data();
      for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
      for (size_t k = 2; k < bottom.size(); ++k) {
        const float* c = bottom[k]->cpu_data();
        for (int64_t i = 0; i < n; ++i) y[i] *= c[i];
      }
      break;
    }
    case caffe::EltwiseParameter::SUM:
      CpuSet(n, 0.f, y);
      for (size_t k = 0; k < bottom.size(); ++k) CpuAxpy(n, coeffs_[k], bottom[k]->cpu_data(), y);
      break;
    case caffe::EltwiseParameter::MAX: {
      int* index = max_index_.data();
      const float* a = bottom[0]->cpu_data();
      const float* b = bottom[1]->cpu_data();
      for (int64_t i = 0; i < n; ++i) {
        const bool first = a[i] > b[i];
        y[i] = first ? a[i] : b[i];
        index[i] = first ? 0 : 1;
      }
      for (size_t k = 2; k < bottom.size(); ++k) {
        const float* c = bottom[k]->cpu_data();
        for (int64_t i = 0; i < n; ++i) {
          if (c[i] > y[i]) {
            y[i] = c[i];
            index[i] = static_cast<int>(k);
          }
        }
      }
      break;
    }
  }
}

void EltwiseLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  const int64_t n = top[0]->count();
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  for (size_t k = 0; k < bottom.size(); ++k) {
    if (!propagate_down[k]) continue;
    float* dx = bottom[k]->mutable_cpu_diff();
    switch (op_) {
      case caffe::EltwiseParameter::PROD:
        if (stable_prod_grad_) {
          // dx_k = dy * prod_{j != k} x_j
          CpuSet(n, 1.f, dx);
          for (size_t j = 0; j < bottom.size(); ++j) {
            if (j == k) continue;
            const float* xj = bottom[j]->cpu_data();
            for (int64_t i = 0; i < n; ++i) dx[i] *= xj[i];
          }
        } else {
          const float* xk = bottom[k]->cpu_data();
          for (int64_t i = 0; i < n; ++i) dx[i] = y[i] / xk[i];
        }
        for (int64_t i = 0; i < n; ++i) dx[i] *= dy[i];
        break;
      case caffe::EltwiseParameter::SUM:
        CpuScaleCopy(n, coeffs_[k], dy, dx);
        break;
      case caffe::EltwiseParameter::MAX: {
        const int* index = max_index_.data();
        const int kk = static_cast<int>(k);
        for (int64_t i = 0; i < n; ++i) dx[i] = index[i] == kk ? dy[i] : 0.f;
        break;
      }
    }
  }
}

bool EltwiseLayer::TakeOver(Layer& next, Blob*, Blob*) {
  if (!Sums() || engine() != Engine::kFast || fused_relu_ || !next.Is("ReLU")) return false;
  fused_relu_ = true;
  relu_slope_ = next.layer_param().relu_param().negative_slope();
  set_fused(true);
  return true;
}

namespace {

// The fused SUM + ReLU works through blocks of this many values, each in
// cache between its passes, the blocks spread over OpenMP threads.
constexpr int64_t kSumBlock = 4096;

}  // namespace

void EltwiseLayer::ForwardFast(const BlobVec& bottom, const BlobVec& top) {
  if (!fused_relu_) return ForwardReference(bottom, top);
  const int64_t n = top[0]->count();
  std::vector<const float*> x(bottom.size());
  for (size_t k = 0; k < bottom.size(); ++k) x[k] = bottom[k]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const float* c = coeffs_.data();
  const float slope = relu_slope_;
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t start = block * kSumBlock;
    const int64_t end = std::min(n, start + kSumBlock);
    // sum_k c_k * x_k, then y > 0 ? y : slope * y; y may alias x_0 only
    // element by element (x_0 is read first).
    for (int64_t i = start; i < end; ++i) y[i] = c[0] * x[0][i];
    for (size_t k = 1; k < x.size(); ++k) {
      const float* xk = x[k];
      const float ck = c[k];
      for (int64_t i = start; i < end; ++i) y[i] += ck * xk[i];
    }
    for (int64_t i = start; i < end; ++i) y[i] *= y[i] > 0.f ? 1.f : slope;
  }
}

void EltwiseLayer::BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  if (!fused_relu_) return BackwardReference(top, propagate_down, bottom);
  const int64_t n = top[0]->count();
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  const float slope = relu_slope_;
  // Bottom 0 last: in place, its diff is the top's.
  std::vector<float*> dx;
  std::vector<float> c;
  for (size_t k = bottom.size(); k-- > 0;) {
    if (!propagate_down[k]) continue;
    dx.push_back(bottom[k]->mutable_cpu_diff());
    c.push_back(coeffs_[k]);
  }
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t start = block * kSumBlock;
    const int64_t end = std::min(n, start + kSumBlock);
    for (size_t j = 0; j < dx.size(); ++j) {
      float* out = dx[j];
      const float ck = c[j];
      for (int64_t i = start; i < end; ++i) out[i] = ck * (dy[i] * (y[i] > 0.f ? 1.f : slope));
    }
  }
}

PSTRAIN_REGISTER_LAYER("Eltwise", EltwiseLayer);

}  // namespace pstrain

// InnerProduct's "vector" implementation: the layer's blobs handed to the
// kernels of inner_product_cpu_kernels.hpp (Caffe's weight layout [N, K], not
// transposed; M <= kVectorMaxRows). The bias gradient is a plain column sum.
#include "worker/layers/inner_product_cpu_kernels.hpp"
#include "worker/layers/inner_product_layer.hpp"

namespace pstrain {

void InnerProductLayer::ForwardVector(const BlobVec& bottom, const BlobVec& top) {
  const FcShape shape{m_, n_, k_};
  FcForward(shape, bottom[0]->cpu_data(), blobs_[0]->cpu_data(),
            bias_term_ ? blobs_[1]->cpu_data() : nullptr, top[0]->mutable_cpu_data());
}

void InnerProductLayer::BackwardVector(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  const FcShape shape{m_, n_, k_};
  const float* dy = top[0]->cpu_diff();
  if (param_propagate_down(0)) {
    FcBackwardWeights(shape, dy, bottom[0]->cpu_data(), blobs_[0]->mutable_cpu_diff());
  }
  if (bias_term_ && param_propagate_down(1)) {
    // db[N] += sum over the rows of dY, row by row.
    float* db = blobs_[1]->mutable_cpu_diff();
    for (int i = 0; i < m_; ++i) {
      const float* row = dy + static_cast<int64_t>(i) * n_;
      for (int j = 0; j < n_; ++j) db[j] += row[j];
    }
  }
  if (propagate_down[0]) {
    FcBackwardData(shape, dy, blobs_[0]->cpu_data(), bottom[0]->mutable_cpu_diff());
  }
}

}  // namespace pstrain

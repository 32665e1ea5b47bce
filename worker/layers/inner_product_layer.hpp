// InnerProduct: a fully connected layer, Caffe's semantics.
//
// The bottom is viewed as an [M, K] matrix, where M is the product of the axes
// before `axis` and K the product of `axis` and the ones after it. The top has
// the bottom's leading axes and then num_output (N): top = bottom * W^T + b.
// Params (Caffe's order): weight [N, K] ([K, N] with transpose), then bias [N]
// when bias_term. K is fixed at set-up; a later bottom with another K is an error.
//
// Reference path: BLAS (GEMM, GEMV for one row). CPU implementations under
// Engine::kFast (CpuImplementations()):
//   "vector"    own kernels for few rows and a large W
//               (inner_product_cpu_kernels.hpp: W streamed once per pass in
//               its own layout, no packing), offered for M <= kVectorMaxRows,
//               N K >= kVectorMinWeights, W not transposed, and an AVX2 or
//               AVX-512 kernel variant; the default with AVX-512
//               (inner_product_layer_vector.cpp).
//   "reference" BLAS, the default otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class InnerProductLayer : public Layer {
 public:
  explicit InnerProductLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "InnerProduct"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasFastPath() const override { return true; }
  std::vector<std::string> CpuImplementations() const override;
  Status SelectCpuImplementation(const std::string& name) override;
  std::string CpuImplementation() const override;

  // The most rows (M) "vector" is offered for: beyond, the product is no
  // longer bound by reading W and a GEMM library's blocking wins.
  static constexpr int kVectorMaxRows = 32;
  // The fewest weights "vector" is offered for (4 MB, more than a core's
  // second-level cache): a smaller W stays in cache, reading it is cheap, and
  // BLAS serves as before.
  static constexpr int64_t kVectorMinWeights = int64_t{1} << 20;

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
  void ForwardFast(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif

 private:
  int axis_ = 1;  // canonical
  int m_ = 0;     // rows: product of the axes before axis_
  int k_ = 0;     // input size
  int n_ = 0;     // num_output
  bool bias_term_ = true;
  bool transpose_ = false;
  std::vector<float> bias_multiplier_;  // M ones
  std::string selected_;                // SelectCpuImplementation's name; empty: the default

  // The "vector" implementation (inner_product_layer_vector.cpp).
  void ForwardVector(const BlobVec& bottom, const BlobVec& top);
  void BackwardVector(const BlobVec& top, const std::vector<bool>& propagate_down,
                      const BlobVec& bottom);
};

}  // namespace pstrain

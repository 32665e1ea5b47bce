// TopOnlyActivationLayer<Math>: the element-wise layers whose backward needs
// only the top (Sigmoid, TanH): y = Math::Forward(x), dx = Math::Backward(y,
// dy). One NeuronLayer base holds the loops of both devices; a layer is its
// Math (two formulas, __host__ __device__, so the CPU loop and the GPU kernel
// evaluate the same expression) plus its registration, and its .cu file
// instantiates the GPU path (top_only_activation_layer.cuh).
//
// Math: static float Forward(float x); static float Backward(float y, float dy);
// both PSTRAIN_ACTIVATION_FN.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/layers/neuron_layer.hpp"

#ifdef __CUDACC__
#define PSTRAIN_ACTIVATION_FN __host__ __device__ inline
#else
#define PSTRAIN_ACTIVATION_FN inline
#endif

namespace pstrain {

template <class Math>
class TopOnlyActivationLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override {
    const float* x = bottom[0]->cpu_data();
    float* y = top[0]->mutable_cpu_data();
    const int64_t n = bottom[0]->count();
    for (int64_t i = 0; i < n; ++i) y[i] = Math::Forward(x[i]);
  }
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override {
    if (!propagate_down[0]) return;
    const float* y = top[0]->cpu_data();
    const float* dy = top[0]->cpu_diff();
    float* dx = bottom[0]->mutable_cpu_diff();
    const int64_t n = top[0]->count();
    for (int64_t i = 0; i < n; ++i) dx[i] = Math::Backward(y[i], dy[i]);
  }
#ifdef PSTRAIN_HAVE_CUDA
  // top_only_activation_layer.cuh; instantiated by the layer's .cu file.
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif
};

}  // namespace pstrain

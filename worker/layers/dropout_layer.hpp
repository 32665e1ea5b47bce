// Dropout: Caffe's inverted dropout.
//
// TRAIN: each element is kept with probability 1 - dropout_ratio and scaled
// by 1 / (1 - dropout_ratio), else zeroed; Backward applies the same mask.
// TEST: identity. May run in place.
//
// The mask is a function of where each sample sits in the data stream, so
// that workers draw different masks, W workers of batch B draw exactly what
// one worker of batch W*B draws, a resumed run draws what the uninterrupted
// run drew, and the CPU and GPU paths draw the same mask. Axis 0 is the
// batch axis (N samples of count / N elements each): element j of sample n
// is kept when
//   DropoutBits(DropoutSampleKey(key, first_sample + n), j) >= DropoutThreshold(ratio)
// where key = MixSeed(context().seed, hash of the layer name) and
// first_sample comes from forward_context() (the stream position the data
// source reported for this batch). Without a data source (first_sample < 0)
// the layer numbers its batches as a data reader of batch N would: batch
// t = context().start_iter + the TRAIN forwards run so far, first_sample =
// (t * world_size + rank) * N.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/layer.hpp"

#ifdef __CUDACC__
#define PSTRAIN_DROPOUT_FN __host__ __device__ inline
#else
#define PSTRAIN_DROPOUT_FN inline
#endif

namespace pstrain {

// splitmix64's finaliser: a bijection of 64-bit words.
PSTRAIN_DROPOUT_FN uint64_t DropoutMix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The key of one sample: Mix(key + G * (position + 1)), G = 0x9E3779B97F4A7C15
// (MixSeed(key, position)).
PSTRAIN_DROPOUT_FN uint64_t DropoutSampleKey(uint64_t key, uint64_t position) {
  return DropoutMix(key + 0x9E3779B97F4A7C15ULL * (position + 1));
}

// 32 random bits for element `element` of a sample: the high half of
// Mix(sample_key + G * (element + 1)).
PSTRAIN_DROPOUT_FN uint32_t DropoutBits(uint64_t sample_key, uint64_t element) {
  return static_cast<uint32_t>(DropoutMix(sample_key + 0x9E3779B97F4A7C15ULL * (element + 1)) >>
                               32);
}

// floor(ratio * 2^32): an element is dropped with probability ratio.
// REQUIRES: 0 <= ratio < 1.
inline uint32_t DropoutThreshold(float ratio) {
  return static_cast<uint32_t>(static_cast<double>(ratio) * 4294967296.0);
}

class DropoutLayer : public Layer {
 public:
  explicit DropoutLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Dropout"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif

 private:
  // MixSeed(context().seed, hash of the layer name).
  uint64_t Key() const;
  // Stream position of sample 0 of the batch a TRAIN forward of `bottom`
  // carries (see the top of this file); sets first_sample_.
  int64_t NextFirstSample(const Blob& bottom);

  float ratio_ = 0.5f;
  float scale_ = 2.f;
  uint32_t threshold_ = 0;
  std::vector<float> mask_;   // CPU paths: per element, 0 or scale_ (last TRAIN forward)
  int64_t first_sample_ = 0;  // of the last TRAIN forward (the GPU path recomputes its mask)
  int64_t own_batches_ = 0;   // TRAIN forwards that had no data source's position
};

}  // namespace pstrain

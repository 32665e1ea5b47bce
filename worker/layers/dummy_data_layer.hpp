// DummyData layer ("DummyData"): tops filled by fillers (Caffe's semantics).
//
// dummy_data_param: shape (once, or once per top) or the legacy num /
// channels / height / width (each once, or once per top; not together with
// shape); data_filler: none (constant 0), one for every top, or one per top.
// Tops with a constant filler are filled once at setup; the others are
// refilled on every Forward, sample by sample (index n along axis 0; a top
// without axes is one sample), as a Data layer shards its stream
// (worker/data/batch_reader.hpp): at global step t, worker `rank` of
// `world_size` with B samples in a top fills sample n with the sample at
// position p = (t*world_size + rank)*B + n, drawn from an Rng seeded by
// MixSeed(MixSeed(MixSeed(net seed, hash(layer name)), top index), p). So W
// workers with batch B together draw, at every step, exactly what one worker
// with batch W*B draws, and a fixed seed gives the same values on every run.
// Fillers whose scale depends on the blob's shape see the whole step's shape
// (axis 0 = world_size*B): xavier and msra draw as their uniform and gaussian
// with that fan, a sparse gaussian keeps a value with probability
// sparse/(world_size*B). Step t is the count of forwards since start_iter, or
// since the last SeekToBatch. No gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class DummyDataLayer : public Layer {
 public:
  explicit DummyDataLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Leaves the tops as they are: shapes are set once, at setup.
  Status Reshape(const BlobVec&, const BlobVec&) override { return Status::Ok(); }
  const char* type() const override { return "DummyData"; }
  bool IsDataSource() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  // The next Forward fills global step t.
  void SeekToBatch(int64_t t) override { next_step_ = t; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}

 private:
  const caffe::FillerParameter& FillerOf(int top_index) const;
  // Fills top `top_index` (a non-constant filler) with global step `step`.
  void FillTop(int top_index, int64_t step, Blob* top);

  std::vector<caffe::FillerParameter> fillers_;  // one, or one per top
  uint64_t layer_seed_ = 0;
  int64_t next_step_ = 0;
  Blob sample_;  // one sample of the top being filled
};

}  // namespace pstrain

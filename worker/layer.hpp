// Layer: the unit of computation of a net, Caffe's contract.
//
// A layer owns its learnable blobs (blobs()), reads bottom blobs and writes
// top blobs. Life cycle, driven by Net:
//   SetUp(bottom, top)     once: checks blob counts, LayerSetUp, Reshape
//   Reshape(bottom, top)   whenever bottom shapes may have changed
//   Forward(bottom, top)   returns the weighted loss of this layer's tops
//   Backward(top, propagate_down, bottom)
// Each layer has a plain reference path (simple loops, im2col + GEMM) and may
// have a fast CPU path (oneDNN) and a GPU path (cuDNN, cuBLAS, own kernels in
// <name>_layer.cu, CUDA builds only); the engine chosen by set_engine() picks
// one. A layer without a GPU path runs its fast CPU path under Engine::kGpu:
// blobs synchronise lazily, so its cpu_ reads see what GPU layers wrote. The
// reference path is the definition the tests hold the other paths against.
// User errors in parameters or shapes are returned as Status from
// LayerSetUp/Reshape; Forward/Backward never fail on checked shapes.
// One thread drives a layer at a time.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/blob.hpp"
#include "common/rng.hpp"
#include "common/status.hpp"
#include "proto/caffe.pb.h"

namespace pstrain {

using BlobVec = std::vector<Blob*>;

enum class Engine { kReference, kFast, kGpu };

inline constexpr int64_t kMaxBlobValues = 2147483647;  // INT_MAX, as Caffe

// The two .npy files of MemoryData layer `layer`: samples (N x C x H x W) and N labels.
struct MemoryDataFiles {
  std::string layer;
  std::string data;
  std::string labels;
};

// Where the net runs: which worker of how many (for data sharding), which
// iteration it starts at (resume), and the seed for fillers, dropout, mirrors.
struct NetContext {
  int rank = 0;
  int world_size = 1;
  int64_t start_iter = 0;
  uint64_t seed = 1701;
  Engine engine = Engine::kFast;
  // No blob of the net (a layer's top or learnable parameter) may hold more
  // values; a set-up that asks for more is refused with the shape, before
  // anything is allocated. INT_MAX is Caffe's own limit; the fuzz targets
  // (fuzz/) set a small one.
  int64_t max_blob_values = kMaxBlobValues;
  // Whether the caller can hand MemoryData layers their arrays (pstrain.caffe's
  // Net.set_input_arrays). Programs that cannot (ps-net, ps-worker) refuse a
  // MemoryData layer at set-up unless memory_data_files names it.
  bool memory_data_from_caller = false;
  // .npy files that feed MemoryData layers, one entry a layer name (ps-net's
  // and ps-worker's --memory-data LAYER=DATA.npy,LABELS.npy): a layer named
  // here maps its files read-only at set-up and reads its batches from them,
  // sharded by rank as the Data layer shards (worker/layers/memory_data_layer.hpp).
  std::vector<MemoryDataFiles> memory_data_files;
};

// What one forward carries besides blobs: where its samples sit in the data
// stream. Sample n of the batch (index n along axis 0) is record
// first_sample + n of the global stream ShardedBatchReader defines, the same
// number on every worker and for every batch size. -1: no data source before
// the layer reports positions (Input, DummyData, a layer a test drives alone).
struct ForwardContext {
  int64_t first_sample = -1;
};

class Layer {
 public:
  explicit Layer(const caffe::LayerParameter& param);
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Checks the blob counts, then LayerSetUp, Reshape and the loss weights.
  // Errors are prefixed with nothing: the caller names the layer.
  Status SetUp(const BlobVec& bottom, const BlobVec& top);
  virtual Status LayerSetUp(const BlobVec& bottom, const BlobVec& top);
  virtual Status Reshape(const BlobVec& bottom, const BlobVec& top) = 0;

  // Runs the engine's forward path and returns sum over tops of
  // loss_weight * sum(top) (only loss tops have non-zero weights).
  float Forward(const BlobVec& bottom, const BlobVec& top);
  void Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  virtual const char* type() const = 0;
  const caffe::LayerParameter& layer_param() const { return param_; }
  const std::string& name() const { return param_.name(); }
  caffe::Phase phase() const { return param_.phase(); }

  std::vector<std::shared_ptr<Blob>>& blobs() { return blobs_; }
  float loss(int top_index) const;
  void set_loss(int top_index, float weight);
  bool param_propagate_down(int param_id) const;
  void set_param_propagate_down(int param_id, bool value);

  void set_engine(Engine engine) { engine_ = engine; }
  Engine engine() const { return engine_; }
  // True when the layer has a fast path distinct from the reference path.
  virtual bool HasFastPath() const { return false; }
  // True when the layer overrides ForwardGpu/BackwardGpu (in a CUDA build).
  virtual bool HasGpuPath() const { return false; }

  // CPU implementations. Under Engine::kFast a layer may have several ways to
  // run its current shape (oneDNN in one layout or another, vectorised loops
  // of its own, the reference); Net with engine auto times them at set-up and
  // selects the fastest. Names of those usable for the current shape, the
  // default first; "reference" (the reference path) is always one of them.
  virtual std::vector<std::string> CpuImplementations() const;
  // Makes Engine::kFast run `name`, one of CpuImplementations(); an error
  // naming the choices otherwise. The choice holds across Reshape; when a new
  // shape cannot run it, the layer runs its default for that shape.
  virtual Status SelectCpuImplementation(const std::string& name);
  // What Engine::kFast runs for the current shape (one of CpuImplementations()).
  virtual std::string CpuImplementation() const;
  // What the GPU path runs for the current shape: "gpu" unless the layer
  // says more (Convolution: which cuDNN API).
  virtual std::string GpuImplementation() const { return fused_ ? "gpu-fused" : "gpu"; }
  // Fusion (Net::FuseLayers): the layer runs as part of a group of layers
  // done in one step by the group's first layer. Its only implementation is
  // then "fused" ("gpu-fused" under the GPU engine; CpuImplementations(),
  // CpuImplementation() and GpuImplementation() of the base say so).
  void set_fused(bool fused) { fused_ = fused; }
  bool fused() const { return fused_; }
  // Net::FuseLayers offers the first layer of a possible group each layer
  // `next` after it that works in place on its first top (`top`, computed
  // from `bottom`) under the same engine, in order, while it takes them:
  // true when this layer will do next's work in its own passes (Net then
  // marks `next` fused). The default takes nothing.
  virtual bool TakeOver(Layer& /*next*/, Blob* /*bottom*/, Blob* /*top*/) { return false; }
  // Type query: true when this layer's Caffe type is `name` (the registry
  // gives each type name one class).
  bool Is(const char* name) const { return std::strcmp(type(), name) == 0; }
  // What Forward/Backward run under the current engine: CpuImplementation()
  // under kFast, "reference" under kReference, GpuImplementation() under kGpu
  // for a layer with a GPU path (its fast CPU path's name otherwise).
  std::string Implementation() const;
  void set_context(const NetContext& context) { context_ = context; }
  const NetContext& context() const { return context_; }
  // Set by Net before each Forward; read by layers whose output depends on
  // the sample (Dropout).
  void set_forward_context(const ForwardContext& context) { forward_context_ = context; }
  const ForwardContext& forward_context() const { return forward_context_; }
  // A data source: the stream position of the first sample of the batch its
  // last Forward delivered (Net hands it to the layers after it); else -1.
  virtual int64_t DeliveredFirstSample() const { return -1; }

  // Blob-count rules (-1: no rule). Checked by SetUp with a clear message.
  virtual int ExactNumBottomBlobs() const { return -1; }
  virtual int MinBottomBlobs() const { return -1; }
  virtual int MaxBottomBlobs() const { return -1; }
  virtual int ExactNumTopBlobs() const { return -1; }
  virtual int MinTopBlobs() const { return -1; }
  virtual int MaxTopBlobs() const { return -1; }
  virtual bool EqualNumBottomTopBlobs() const { return false; }
  // When true, Net creates the minimum number of tops a prototxt leaves out.
  virtual bool AutoTopBlobs() const { return false; }
  // False for bottoms that cannot take a gradient (labels).
  virtual bool AllowForceBackward(int /*bottom_index*/) const { return true; }
  // True for a layer whose tops' shapes depend on its bottoms' values (Filter):
  // its Forward reshapes its tops, and Net reshapes every layer after it
  // before that layer's forward (Caffe reshapes every layer before each Forward).
  virtual bool ReshapesTopsInForward() const { return false; }
  // Loss layers give their first top a default loss weight of 1.
  virtual bool IsLoss() const { return false; }
  // Bad input met while running (a corrupt LMDB record, a label out of
  // range): Forward cannot fail, so such a layer keeps the first error here
  // and the net checks it after each forward. Ok for most layers.
  virtual Status RuntimeStatus() const { return Status::Ok(); }
  // True for the layers that bring samples into the net (Data, DummyData,
  // Input): their first top's first dimension is the batch (Net::batch_size).
  virtual bool IsDataSource() const { return false; }
  // A layer that reads a data stream delivers global step t (counted in
  // forwards from the start of the stream) at its next Forward; the others
  // ignore it. REQUIRES: t >= 0, after SetUp.
  virtual void SeekToBatch(int64_t /*t*/) {}

 protected:
  virtual void ForwardReference(const BlobVec& bottom, const BlobVec& top) = 0;
  virtual void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) = 0;
  virtual void ForwardFast(const BlobVec& bottom, const BlobVec& top) {
    ForwardReference(bottom, top);
  }
  virtual void BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
    BackwardReference(top, propagate_down, bottom);
  }
  // GPU path: works on gpu_data()/gpu_diff() on GpuContext::ForThisThread()
  // streams. Declared in every build; overrides are defined in .cu files.
  virtual void ForwardGpu(const BlobVec& bottom, const BlobVec& top) { ForwardFast(bottom, top); }
  virtual void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
    BackwardFast(top, propagate_down, bottom);
  }

  caffe::LayerParameter param_;
  std::vector<std::shared_ptr<Blob>> blobs_;
  NetContext context_;
  ForwardContext forward_context_;

 private:
  Status CheckBlobCounts(const BlobVec& bottom, const BlobVec& top) const;
  Status SetLossWeights(const BlobVec& top);

  Engine engine_ = Engine::kFast;
  // Set by SelectCpuImplementation("reference") on a layer whose own
  // implementations do not override it: kFast then runs the reference path.
  bool fast_runs_reference_ = false;
  bool fused_ = false;
  std::vector<float> loss_;
  std::vector<bool> param_propagate_down_;
};

}  // namespace pstrain

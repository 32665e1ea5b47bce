// Net: a directed acyclic graph of layers built from a Caffe NetParameter.
//
// Building a net filters layers by phase/level/stage rules, upgrades older
// formats, inserts split layers, creates every layer through the registry,
// wires bottoms to tops (in-place where a top repeats its bottom), shares
// parameters by ParamSpec name, and works out which layers need backward.
// Every build error names the file, the line of the layer when known, the
// layer and its type.
//
// Threading: a Net is driven by one thread at a time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/blob.hpp"
#include "common/status.hpp"
#include "proto/caffe.pb.h"
#include "worker/layer.hpp"
#include "worker/net_autotune.hpp"

namespace pstrain {

// One learnable parameter of the net, in the order Caffe's learnable_params
// uses (layer order, then blob order; shared parameters once, at their owner).
struct LearnableParam {
  std::string layer;    // owning layer (the first layer that uses the blob)
  int layer_index = 0;  // its index in layers(); its gradient is final after its backward
  int index = 0;        // blob index within that layer
  std::string name;     // "<layer>/<index>" or the ParamSpec name
  Blob* blob = nullptr;
  float lr_mult = 1.f;
  float decay_mult = 1.f;
};

// Calls around each layer's forward and backward (pycaffe's before_forward
// and friends): the layer's index. Any may be empty.
struct LayerHooks {
  std::function<void(int)> before_forward;
  std::function<void(int)> after_forward;
  std::function<void(int)> before_backward;
  std::function<void(int)> after_backward;
};

struct NetOptions {
  caffe::NetState state;         // phase TRAIN by default
  NetContext context;            // rank, world size, seed, engine
  std::string source = "<net>";  // file name for messages
  std::vector<int> layer_lines;  // line of each layer in `source`, if known
  // Engine auto (worker/net_autotune.hpp): with context.engine kFast, each
  // layer with several CPU implementations gets the fastest for its shape at
  // the end of set-up.
  AutotuneOptions autotune;
  // Under the fast and GPU engines, fuses layers that can run as one
  // (Net::FuseLayers: a BatchNorm, the Scale after it and a ReLU, in place;
  // an Eltwise SUM and its ReLU). The environment variable
  // PSTRAIN_FUSE_LAYERS=0 turns it off for every net.
  bool fuse_layers = true;
};

// "file:line: layer 'x' (Type)" for layer i of a net read from `source` whose
// layers start at `lines` (1-based; 0 or missing: no line), as build errors
// name a layer.
std::string LayerPlace(const std::string& source, const std::vector<int>& lines, int i,
                       const caffe::LayerParameter& layer);

// False when the environment variable PSTRAIN_FUSE_LAYERS is 0 or false
// (read on every call; NetOptions::fuse_layers).
bool LayerFusionEnabled();

class Net {
 public:
  // Builds from a parsed NetParameter (upgraded here if it is an older form).
  static Result<std::unique_ptr<Net>> Create(const caffe::NetParameter& param,
                                             const NetOptions& options);
  // Reads a text prototxt (errors name file:line) and builds it.
  static Result<std::unique_ptr<Net>> FromFile(const std::string& path, NetOptions options);
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  // Forward through every layer; returns the total weighted loss. Each layer
  // gets the ForwardContext of the last data source before it.
  float Forward();
  // Backward through the layers that need it (param diffs accumulate).
  // `after_layer(i)`, when given, runs right after layer i's backward, so a
  // caller can ship the gradients that are now final (wait-free backprop).
  void Backward(const std::function<void(int)>& after_layer = nullptr);
  // Caffe's ForwardFromTo / BackwardFromTo: layers start..end inclusive
  // (backward from `start` down to `end`). REQUIRES: valid indices, start <=
  // end for forward and start >= end for backward (checked by callers).
  float ForwardFromTo(int start, int end);
  void BackwardFromTo(int start, int end);
  float ForwardBackward() {
    float loss = Forward();
    Backward();
    return loss;
  }
  void ClearParamDiffs();
  // Replaces the hooks run around each layer by Forward* and Backward*.
  void set_layer_hooks(LayerHooks hooks) { hooks_ = std::move(hooks); }
  // The first run-time error any layer met (see Layer::RuntimeStatus), named;
  // or the last forward's: a layer after one whose tops change shape in
  // forward (Layer::ReshapesTopsInForward) that refused its new bottom shapes
  // (that forward stopped there).
  Status RuntimeStatus() const;
  // Re-runs every layer's Reshape (after an input shape changed).
  Status Reshape();
  // Every data stream delivers global step t at its next Forward (a test pass
  // starts at 0; a resumed run at iteration * iter_size).
  void SeekData(int64_t t);
  // Samples one Forward takes in: the first dimension of the first data
  // source's first top (Layer::IsDataSource); 0 when the net has none.
  int batch_size() const;

  // Copies learned blobs from `weights` into the layers of the same name
  // (Caffe's CopyTrainedLayersFrom). Layers absent from `weights` keep their
  // values; a shape mismatch is an error naming the layer and both shapes.
  Status CopyTrainedLayersFrom(const caffe::NetParameter& weights, const std::string& source);
  // Reads a binary .caffemodel (or a text NetParameter with blobs) and copies.
  Status CopyTrainedLayersFromFile(const std::string& path);
  // Makes this net's parameters share storage with `other`'s layers of the same
  // name (test nets share the train net's weights). Shapes must match.
  Status ShareTrainedLayersWith(const Net& other);
  // The net with its learned blobs, as Caffe writes a .caffemodel.
  void ToProto(caffe::NetParameter* out, bool write_diff = false) const;
  Status WriteCaffemodel(const std::string& path, bool write_diff = false) const;
  // The same in Caffe's HDF5 layout (Net::ToHDF5; worker/caffe_hdf5.hpp):
  // a blob shared with an earlier layer is written by its owner only.
  Status WriteCaffemodelHdf5(const std::string& path, bool write_diff = false) const;
  // Either, by the name: HDF5 for "*.h5" (snapshot_format HDF5), else binary.
  Status WriteSnapshotModel(const std::string& path, bool write_diff) const;

  const std::string& name() const { return name_; }
  caffe::Phase phase() const { return phase_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  const std::vector<BlobVec>& bottom_vecs() const { return bottom_vecs_; }
  const std::vector<BlobVec>& top_vecs() const { return top_vecs_; }
  const std::vector<std::vector<bool>>& bottom_need_backward() const {
    return bottom_need_backward_;
  }
  bool layer_need_backward(int i) const { return layer_need_backward_[i]; }
  const std::vector<LearnableParam>& learnable_params() const { return learnable_params_; }
  // Blobs no later layer consumes (loss, accuracy, probabilities; the output of an
  // in-place layer counts), in creation order.
  const std::vector<std::string>& output_blob_names() const { return output_names_; }
  Blob* blob_by_name(const std::string& name) const;
  // Every blob in creation order (Caffe's blobs() / blob_names()); the
  // layers' bottoms and tops as indices into it.
  int num_blobs() const { return static_cast<int>(blobs_.size()); }
  Blob* blob(int id) const { return blobs_[id].get(); }
  const std::vector<std::string>& blob_names() const { return blob_names_; }
  const std::vector<int>& bottom_ids(int layer) const { return bottom_ids_[layer]; }
  const std::vector<int>& top_ids(int layer) const { return top_ids_[layer]; }
  Layer* layer_by_name(const std::string& name) const;
  const caffe::NetParameter& param() const { return param_; }  // filtered, with splits
  // What engine auto chose at set-up (empty without it).
  const std::vector<ImplementationChoice>& implementation_choices() const {
    return implementation_choices_;
  }

 private:
  Net() = default;
  Status Init(const caffe::NetParameter& param, const NetOptions& options);
  Status AppendLayer(int index, const NetOptions& options);
  Status AppendParams(int layer_index);
  void ComputeBackwardNeeds(bool force_backward);
  // Hands each Scale that multiplies a BatchNorm's top in place, right after
  // it, by a learned per-channel scale (and bias) to that BatchNorm, and the
  // ReLU in place right after such a Scale too (batch_norm_layer.hpp, "Fused
  // with the Scale after it"), unless the BatchNorm's top carries a loss
  // weight; under the fast engine, the ReLU in place after an Eltwise SUM to
  // that Eltwise (eltwise_layer.hpp). Runs after ComputeBackwardNeeds, before
  // engine auto (net_fusion.cpp).
  void FuseLayers();
  void BackwardLayer(int i);                   // with the hooks
  bool WorksInPlaceOn(int i, int next) const;  // net_fusion.cpp
  std::string Where(int layer_index) const;    // "file:line: layer 'x' (Type)"

  std::string name_;
  caffe::Phase phase_ = caffe::TRAIN;
  std::string source_;
  std::vector<int> lines_;
  caffe::NetParameter param_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::unique_ptr<Blob>> blobs_;
  std::vector<std::string> blob_names_;
  std::map<std::string, int> blob_index_;
  std::vector<bool> blob_need_backward_;
  std::vector<BlobVec> bottom_vecs_;
  std::vector<BlobVec> top_vecs_;
  std::vector<std::vector<int>> bottom_ids_;
  std::vector<std::vector<int>> top_ids_;
  std::vector<std::vector<bool>> bottom_need_backward_;
  std::vector<bool> layer_need_backward_;
  std::vector<LearnableParam> learnable_params_;
  std::map<std::string, int> param_owner_;  // ParamSpec name -> learnable_params_ index
  std::vector<std::string> output_names_;
  std::vector<ImplementationChoice> implementation_choices_;
  LayerHooks hooks_;
  Status forward_status_;  // the last ForwardFromTo's reshape error, if any
};

}  // namespace pstrain

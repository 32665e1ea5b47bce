#include "worker/net.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include "common/proto_io.hpp"
#include "worker/caffe_hdf5.hpp"
#include "worker/layer_registry.hpp"
#include "worker/net_rewrite.hpp"
#include "worker/upgrade.hpp"

namespace pstrain {

Result<std::unique_ptr<Net>> Net::Create(const caffe::NetParameter& param,
                                         const NetOptions& options) {
  std::unique_ptr<Net> net(new Net());
  PSTRAIN_RETURN_IF_ERROR(net->Init(param, options));
  return net;
}

Result<std::unique_ptr<Net>> Net::FromFile(const std::string& path, NetOptions options) {
  caffe::NetParameter param;
  std::vector<int> lines;
  PSTRAIN_RETURN_IF_ERROR(ReadTextProtoWithLines(path, &param, "layer", &lines));
  if (param.layer_size() == 0 && param.layers_size() > 0) {  // V1 form
    PSTRAIN_RETURN_IF_ERROR(ReadTextProtoWithLines(path, &param, "layers", &lines));
  }
  options.source = path;
  options.layer_lines = lines;
  return Create(param, options);
}

std::string LayerPlace(const std::string& source, const std::vector<int>& lines, int i,
                       const caffe::LayerParameter& layer) {
  std::string where = source;
  if (i < static_cast<int>(lines.size()) && lines[i] > 0) where += ":" + std::to_string(lines[i]);
  return where + ": layer '" + layer.name() + "' (" + layer.type() + ")";
}

std::string Net::Where(int layer_index) const {
  return LayerPlace(source_, lines_, layer_index, param_.layer(layer_index));
}

Status Net::Init(const caffe::NetParameter& in_param, const NetOptions& options) {
  source_ = options.source;
  caffe::NetParameter upgraded = in_param;
  if (NetNeedsUpgrade(upgraded)) PSTRAIN_RETURN_IF_ERROR(UpgradeNet(&upgraded, source_));
  caffe::NetState state = options.state;
  if (!state.has_phase()) state.set_phase(caffe::TRAIN);
  // The net's own state fields apply where the caller gave none (Caffe merges them).
  if (upgraded.has_state()) {
    if (!state.has_level()) state.set_level(upgraded.state().level());
    if (state.stage_size() == 0) *state.mutable_stage() = upgraded.state().stage();
  }
  phase_ = state.phase();
  name_ = upgraded.name();
  lines_ = options.layer_lines;
  // An upgrade may put an Input layer in front (from the net's input fields).
  while (!lines_.empty() && static_cast<int>(lines_.size()) < upgraded.layer_size()) {
    lines_.insert(lines_.begin(), 0);
  }
  if (static_cast<int>(lines_.size()) != upgraded.layer_size()) lines_.clear();

  for (int i = 0; i < upgraded.layer_size(); ++i) {  // FilterNet's rule, with the line
    const auto& layer = upgraded.layer(i);
    if (layer.include_size() > 0 && layer.exclude_size() > 0) {
      return Status::Error(LayerPlace(source_, lines_, i, layer) +
                           ": has both include and exclude rules; give one or the other");
    }
  }
  caffe::NetParameter filtered;
  PSTRAIN_RETURN_IF_ERROR(FilterNet(upgraded, state, &filtered, &lines_).WithContext(source_));
  InsertSplits(filtered, &param_, &lines_);
  for (auto& layer : *param_.mutable_layer()) layer.set_phase(phase_);

  const int n = param_.layer_size();
  bottom_vecs_.resize(n);
  top_vecs_.resize(n);
  bottom_ids_.resize(n);
  top_ids_.resize(n);
  bottom_need_backward_.resize(n);
  // Outputs: blobs still available after the last layer, as Caffe tracks
  // them (a bottom is used up, a top, in-place ones included, made
  // available), in creation order.
  std::set<std::string> available;
  for (int i = 0; i < n; ++i) {
    PSTRAIN_RETURN_IF_ERROR(AppendLayer(i, options));
    for (const auto& b : param_.layer(i).bottom()) available.erase(b);
    for (const auto& t : param_.layer(i).top()) available.insert(t);
  }
  ComputeBackwardNeeds(param_.force_backward());
  if (options.fuse_layers && options.context.engine != Engine::kReference && LayerFusionEnabled()) {
    FuseLayers();
  }
  for (const auto& blob_name : blob_names_) {
    if (available.erase(blob_name) > 0) output_names_.push_back(blob_name);
  }
  if (options.autotune.enabled && options.context.engine == Engine::kFast) {
    auto chosen = AutotuneCpuImplementations(*this, options.autotune);
    if (!chosen.ok()) return chosen.status().WithContext(source_ + ": engine auto");
    implementation_choices_ = std::move(chosen).value();
  }
  return Status::Ok();
}

Status Net::AppendLayer(int index, const NetOptions& options) {
  const caffe::LayerParameter& lp = param_.layer(index);
  if (lp.type().empty()) return Status::Error(Where(index) + ": layer has no type");
  auto created = LayerRegistry::Global().Create(lp);
  if (!created.ok()) return created.status().WithContext(Where(index));
  std::unique_ptr<Layer> layer = std::move(created).value();
  NetContext context = options.context;
  layer->set_context(context);
  layer->set_engine(context.engine);

  for (int b = 0; b < lp.bottom_size(); ++b) {
    auto it = blob_index_.find(lp.bottom(b));
    if (it == blob_index_.end()) {
      return Status::Error(Where(index) + ": unknown bottom blob '" + lp.bottom(b) +
                           "' (no earlier layer produces it)");
    }
    bottom_ids_[index].push_back(it->second);
    bottom_vecs_[index].push_back(blobs_[it->second].get());
  }
  for (int t = 0; t < lp.top_size(); ++t) {
    const std::string& name = lp.top(t);
    if (t < lp.bottom_size() && lp.bottom(t) == name) {  // in place
      top_ids_[index].push_back(bottom_ids_[index][t]);
      top_vecs_[index].push_back(bottom_vecs_[index][t]);
      continue;
    }
    if (blob_index_.count(name)) {
      return Status::Error(Where(index) + ": top blob '" + name +
                           "' is already produced by an earlier layer (only in-place layers may "
                           "reuse a name, at the same position as their bottom)");
    }
    const int id = static_cast<int>(blobs_.size());
    blobs_.push_back(std::make_unique<Blob>());
    blob_names_.push_back(name);
    blob_index_[name] = id;
    top_ids_[index].push_back(id);
    top_vecs_[index].push_back(blobs_.back().get());
  }
  // Tops a prototxt leaves out of a layer that makes its own (a loss without
  // a top): unnamed blobs, as Caffe's "(automatic)" tops; never net outputs.
  if (layer->AutoTopBlobs()) {
    const int needed = std::max(layer->MinTopBlobs(), layer->ExactNumTopBlobs());
    for (int t = lp.top_size(); t < needed; ++t) {
      top_ids_[index].push_back(static_cast<int>(blobs_.size()));
      blobs_.push_back(std::make_unique<Blob>());
      blob_names_.push_back("(automatic)");
      top_vecs_[index].push_back(blobs_.back().get());
    }
  }
  layers_.push_back(std::move(layer));
  Status setup = layers_.back()->SetUp(bottom_vecs_[index], top_vecs_[index]);
  if (!setup.ok()) return setup.WithContext(Where(index));
  // Tops are allocated on first use, so a shape over the limit is refused
  // here before it costs memory (parameters are checked before they are filled).
  for (size_t t = 0; t < top_vecs_[index].size(); ++t) {
    const Blob& top = *top_vecs_[index][t];
    if (top.count() > context.max_blob_values) {
      return Status::Error(Where(index) + ": top " + std::to_string(t) + " of shape " +
                           top.shape_string() + " is larger than the limit of " +
                           std::to_string(context.max_blob_values) + " values");
    }
  }
  return AppendParams(index);
}

Status Net::AppendParams(int layer_index) {
  Layer& layer = *layers_[layer_index];
  // The layer's own copy: a layer may pin specs (BatchNorm fixes lr_mult 0).
  const caffe::LayerParameter& lp = layer.layer_param();
  const int num_params = static_cast<int>(layer.blobs().size());
  if (lp.param_size() > num_params) {
    return Status::Error(Where(layer_index) + ": " + std::to_string(lp.param_size()) +
                         " param specs given but the layer has " + std::to_string(num_params) +
                         " learnable blobs");
  }
  for (int p = 0; p < num_params; ++p) {
    const caffe::ParamSpec spec = p < lp.param_size() ? lp.param(p) : caffe::ParamSpec();
    Blob* blob = layer.blobs()[p].get();
    layer.set_param_propagate_down(p, spec.lr_mult() != 0.f && layer.param_propagate_down(p));
    const std::string& shared_name = spec.name();
    auto owner = shared_name.empty() ? param_owner_.end() : param_owner_.find(shared_name);
    if (owner == param_owner_.end()) {
      LearnableParam info;
      info.layer = lp.name();
      info.layer_index = layer_index;
      info.index = p;
      info.name = shared_name.empty() ? lp.name() + "/" + std::to_string(p) : shared_name;
      info.blob = blob;
      info.lr_mult = spec.lr_mult();
      info.decay_mult = spec.decay_mult();
      if (!shared_name.empty())
        param_owner_[shared_name] = static_cast<int>(learnable_params_.size());
      learnable_params_.push_back(info);
      continue;
    }
    LearnableParam& info = learnable_params_[owner->second];
    const bool strict = spec.share_mode() != caffe::ParamSpec::PERMISSIVE;
    if ((strict && blob->shape() != info.blob->shape()) || blob->count() != info.blob->count()) {
      return Status::Error(Where(layer_index) + ": shared param '" + shared_name + "' has shape " +
                           blob->shape_string() + " here but " + info.blob->shape_string() +
                           " in layer '" + info.layer + "'");
    }
    if (spec.has_lr_mult() && spec.lr_mult() != info.lr_mult) {
      return Status::Error(Where(layer_index) + ": shared param '" + shared_name +
                           "' has lr_mult " + std::to_string(spec.lr_mult()) + " here but " +
                           std::to_string(info.lr_mult) + " in layer '" + info.layer + "'");
    }
    blob->ShareData(*info.blob);
    blob->ShareDiff(*info.blob);
  }
  return Status::Ok();
}

void Net::ComputeBackwardNeeds(bool force_backward) {
  const int n = static_cast<int>(layers_.size());
  blob_need_backward_.assign(blobs_.size(), false);
  layer_need_backward_.assign(n, false);
  for (int i = 0; i < n; ++i) {
    Layer& layer = *layers_[i];
    bool need = false;
    bottom_need_backward_[i].clear();
    for (size_t b = 0; b < bottom_ids_[i].size(); ++b) {
      bool nb = blob_need_backward_[bottom_ids_[i][b]] ||
                (force_backward && layer.AllowForceBackward(static_cast<int>(b)));
      if (!layer.AllowForceBackward(static_cast<int>(b))) nb = false;
      bottom_need_backward_[i].push_back(nb);
      need = need || nb;
    }
    for (size_t p = 0; p < layer.blobs().size(); ++p) {
      need = need || layer.param_propagate_down(static_cast<int>(p));
    }
    layer_need_backward_[i] = need;
    for (int id : top_ids_[i]) {
      if (need) blob_need_backward_[id] = true;
    }
  }
  // Layers that do not lead to a loss need no backward (Caffe's pruning).
  std::vector<bool> blob_feeds_loss(blobs_.size(), false);
  for (int i = n - 1; i >= 0; --i) {
    bool contributes = false;
    for (size_t t = 0; t < top_ids_[i].size(); ++t) {
      if (layers_[i]->loss(static_cast<int>(t)) != 0.f || blob_feeds_loss[top_ids_[i][t]]) {
        contributes = true;
      }
    }
    if (!contributes && !force_backward) {
      layer_need_backward_[i] = false;
      bottom_need_backward_[i].assign(bottom_need_backward_[i].size(), false);
    }
    if (contributes) {
      for (int id : bottom_ids_[i]) blob_feeds_loss[id] = true;
    }
  }
}

float Net::Forward() { return ForwardFromTo(0, static_cast<int>(layers_.size()) - 1); }

float Net::ForwardFromTo(int start, int end) {
  float loss = 0.f;
  ForwardContext batch;  // from the last data source so far
  forward_status_ = Status::Ok();
  bool shapes_may_change = false;  // a layer before reshaped its tops in this forward
  for (int i = start; i <= end; ++i) {
    if (shapes_may_change) {
      Status s = layers_[i]->Reshape(bottom_vecs_[i], top_vecs_[i]);
      if (!s.ok()) {
        forward_status_ = s.WithContext(Where(i));
        break;
      }
    }
    if (hooks_.before_forward) hooks_.before_forward(i);
    layers_[i]->set_forward_context(batch);
    loss += layers_[i]->Forward(bottom_vecs_[i], top_vecs_[i]);
    shapes_may_change = shapes_may_change || layers_[i]->ReshapesTopsInForward();
    if (hooks_.after_forward) hooks_.after_forward(i);
    const int64_t first = layers_[i]->DeliveredFirstSample();
    if (first >= 0) batch.first_sample = first;
  }
  return loss;
}

void Net::Backward(const std::function<void(int)>& after_layer) {
  for (int i = static_cast<int>(layers_.size()) - 1; i >= 0; --i) {
    BackwardLayer(i);
    if (after_layer) after_layer(i);
  }
}

void Net::BackwardFromTo(int start, int end) {
  for (int i = start; i >= end; --i) BackwardLayer(i);
}

void Net::BackwardLayer(int i) {
  if (hooks_.before_backward) hooks_.before_backward(i);
  // After a forward stopped by a layer that refused its new shapes, the layers
  // past it hold stale shapes: no backward runs on them.
  if (layer_need_backward_[i] && forward_status_.ok()) {
    layers_[i]->Backward(top_vecs_[i], bottom_need_backward_[i], bottom_vecs_[i]);
  }
  if (hooks_.after_backward) hooks_.after_backward(i);
}

void Net::ClearParamDiffs() {
  for (const auto& p : learnable_params_) p.blob->SetDiffZero();
}

Status Net::RuntimeStatus() const {
  if (!forward_status_.ok()) return forward_status_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Status s = layers_[i]->RuntimeStatus();
    if (!s.ok()) return s.WithContext(Where(static_cast<int>(i)));
  }
  return Status::Ok();
}

Status Net::Reshape() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    Status s = layers_[i]->Reshape(bottom_vecs_[i], top_vecs_[i]);
    if (!s.ok()) return s.WithContext(Where(static_cast<int>(i)));
  }
  return Status::Ok();
}

void Net::SeekData(int64_t t) {
  for (const auto& layer : layers_) layer->SeekToBatch(t);
}

int Net::batch_size() const {
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i]->IsDataSource() && !top_vecs_[i].empty() && top_vecs_[i][0]->num_axes() > 0) {
      return top_vecs_[i][0]->shape(0);
    }
  }
  return 0;
}

Status Net::CopyTrainedLayersFrom(const caffe::NetParameter& in_weights,
                                  const std::string& source) {
  caffe::NetParameter weights = in_weights;
  if (NetNeedsUpgrade(weights)) PSTRAIN_RETURN_IF_ERROR(UpgradeNet(&weights, source));
  for (const auto& src : weights.layer()) {
    Layer* target = layer_by_name(src.name());
    if (target == nullptr || src.blobs_size() == 0) continue;
    if (static_cast<int>(target->blobs().size()) != src.blobs_size()) {
      return Status::Error(source + ": layer '" + src.name() + "' has " +
                           std::to_string(src.blobs_size()) + " blobs in the file but " +
                           std::to_string(target->blobs().size()) + " in the net");
    }
    for (int j = 0; j < src.blobs_size(); ++j) {
      Status s = target->blobs()[j]->FromProto(src.blobs(j), /*reshape=*/false);
      if (!s.ok()) {
        return s.WithContext(source + ": layer '" + src.name() + "' blob " + std::to_string(j));
      }
    }
  }
  return Status::Ok();
}

Status Net::CopyTrainedLayersFromFile(const std::string& path) {
  caffe::NetParameter weights;
  // Caffe's rule: a name ending in ".h5" is an HDF5 model (snapshot_format: HDF5).
  Status read = ReadCaffemodelFile(path, &weights);
  if (!read.ok()) {
    caffe::NetParameter text;  // a binary name may hold a text NetParameter; an HDF5 one not
    if (IsHdf5SnapshotPath(path) || !ReadTextProto(path, &text).ok()) return read;
    weights = text;
  }
  // Check everything first so a bad file changes no weight: copy into a scratch net state.
  std::vector<std::vector<float>> backup;
  for (const auto& layer : layers_) {
    for (const auto& blob : layer->blobs()) {
      backup.emplace_back(blob->cpu_data(), blob->cpu_data() + blob->count());
    }
  }
  Status s = CopyTrainedLayersFrom(weights, path);
  if (!s.ok()) {
    size_t k = 0;
    for (const auto& layer : layers_) {
      for (const auto& blob : layer->blobs()) {
        std::copy(backup[k].begin(), backup[k].end(), blob->mutable_cpu_data());
        ++k;
      }
    }
  }
  return s;
}

Status Net::ShareTrainedLayersWith(const Net& other) {
  for (const auto& layer : layers_) {
    Layer* source = other.layer_by_name(layer->name());
    if (source == nullptr) continue;
    if (source->blobs().size() != layer->blobs().size()) {
      return Status::Error("layer '" + layer->name() + "' has " +
                           std::to_string(layer->blobs().size()) + " blobs in the " +
                           (phase_ == caffe::TEST ? "test" : "train") + " net but " +
                           std::to_string(source->blobs().size()) + " in the other net");
    }
    for (size_t j = 0; j < layer->blobs().size(); ++j) {
      Blob& mine = *layer->blobs()[j];
      const Blob& theirs = *source->blobs()[j];
      if (mine.shape() != theirs.shape()) {
        return Status::Error("layer '" + layer->name() + "' blob " + std::to_string(j) +
                             " has shape " + mine.shape_string() + " in one net and " +
                             theirs.shape_string() + " in the other");
      }
      mine.ShareData(theirs);
    }
  }
  return Status::Ok();
}

void Net::ToProto(caffe::NetParameter* out, bool write_diff) const {
  out->Clear();
  out->set_name(name_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    caffe::LayerParameter* lp = out->add_layer();
    *lp = param_.layer(static_cast<int>(i));
    lp->clear_blobs();
    for (const auto& blob : layers_[i]->blobs()) blob->ToProto(lp->add_blobs(), write_diff);
  }
}

Status Net::WriteCaffemodel(const std::string& path, bool write_diff) const {
  caffe::NetParameter proto;
  ToProto(&proto, write_diff);
  return WriteBinaryProto(proto, path);
}

Status Net::WriteCaffemodelHdf5(const std::string& path, bool write_diff) const {
  caffe::NetParameter proto;
  ToProto(&proto, write_diff);
  std::set<std::pair<int, int>> owned, shared;
  for (const LearnableParam& p : learnable_params_) owned.insert({p.layer_index, p.index});
  for (size_t l = 0; l < layers_.size(); ++l) {
    for (size_t b = 0; b < layers_[l]->blobs().size(); ++b) {
      const std::pair<int, int> at{static_cast<int>(l), static_cast<int>(b)};
      if (!owned.count(at)) shared.insert(at);
    }
  }
  return pstrain::WriteCaffemodelHdf5(proto, shared, write_diff, path);
}

Status Net::WriteSnapshotModel(const std::string& path, bool write_diff) const {
  return IsHdf5SnapshotPath(path) ? WriteCaffemodelHdf5(path, write_diff)
                                  : WriteCaffemodel(path, write_diff);
}

Blob* Net::blob_by_name(const std::string& name) const {
  auto it = blob_index_.find(name);
  return it == blob_index_.end() ? nullptr : blobs_[it->second].get();
}

Layer* Net::layer_by_name(const std::string& name) const {
  for (const auto& layer : layers_) {
    if (layer->name() == name) return layer.get();
  }
  return nullptr;
}

}  // namespace pstrain

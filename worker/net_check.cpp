#include "worker/net_check.hpp"

#include <functional>

#include "common/proto_io.hpp"
#include "worker/data/batch_reader.hpp"
#include "worker/net_rewrite.hpp"
#include "worker/trainer.hpp"
#include "worker/upgrade.hpp"

namespace pstrain {
namespace {

bool KeptIn(const caffe::LayerParameter& layer, const caffe::NetState& state) {
  bool keep = layer.include_size() == 0;
  for (const auto& rule : layer.exclude()) {
    if (StateMeetsRule(state, rule)) keep = false;
  }
  for (const auto& rule : layer.include()) {
    if (StateMeetsRule(state, rule)) keep = true;
  }
  return keep;
}

// The Data layer's own set-up checks (worker/layers/data_layer.cpp), then its
// first record: the Input layer that delivers what it would.
Status ReplaceDataLayer(caffe::LayerParameter* layer, caffe::Phase phase) {
  const caffe::DataParameter& p = layer->data_param();
  if (p.source().empty()) return Status::InvalidArgument("data_param.source must be given");
  if (p.batch_size() == 0) return Status::InvalidArgument("data_param.batch_size must be positive");
  if (p.batch_size() > static_cast<uint32_t>(INT32_MAX)) {
    return Status::InvalidArgument("data_param.batch_size is too large");
  }
  if (p.rand_skip() != 0) {
    return Status::InvalidArgument(
        "data_param.rand_skip is not supported (sharding fixes the records each worker reads)");
  }
  if (layer->top_size() < 1 || layer->top_size() > 2) {
    return Status::InvalidArgument("a Data layer has 1 or 2 tops, got " +
                                   std::to_string(layer->top_size()));
  }
  caffe::TransformationParameter transform = layer->transform_param();
  if (p.has_scale() && !transform.has_scale()) transform.set_scale(p.scale());
  if (p.has_mean_file() && !transform.has_mean_file()) transform.set_mean_file(p.mean_file());
  if (p.has_crop_size() && !transform.has_crop_size()) transform.set_crop_size(p.crop_size());
  if (p.has_mirror() && !transform.has_mirror()) transform.set_mirror(p.mirror());
  ShardSpec shard;
  shard.batch_size = static_cast<int>(p.batch_size());
  PSTRAIN_ASSIGN_OR_RETURN(auto reader,
                           ShardedBatchReader::Open(p.source(), transform, phase, shard,
                                                    BackendOf(p)));
  const std::vector<int> shape = reader->data_shape();
  layer->set_type("Input");
  layer->clear_data_param();
  layer->clear_transform_param();
  caffe::InputParameter* input = layer->mutable_input_param();
  input->clear_shape();
  caffe::BlobShape* data = input->add_shape();
  for (int d : shape) data->add_dim(d);
  if (layer->top_size() > 1) input->add_shape()->add_dim(shape[0]);
  return Status::Ok();
}

}  // namespace

Result<NetWithoutData> NetParamWithoutData(const caffe::NetParameter& param,
                                           const std::string& source, const caffe::NetState& state,
                                           std::vector<int> lines) {
  NetWithoutData out;
  out.param = param;
  if (NetNeedsUpgrade(out.param)) PSTRAIN_RETURN_IF_ERROR(UpgradeNet(&out.param, source));
  // An upgrade may put an Input layer in front (Net::Init does the same).
  while (!lines.empty() && static_cast<int>(lines.size()) < out.param.layer_size()) {
    lines.insert(lines.begin(), 0);
  }
  if (static_cast<int>(lines.size()) != out.param.layer_size()) lines.clear();
  caffe::NetState merged = state;
  if (!merged.has_phase()) merged.set_phase(caffe::TRAIN);
  if (out.param.has_state()) {
    if (!merged.has_level()) merged.set_level(out.param.state().level());
    if (merged.stage_size() == 0) *merged.mutable_stage() = out.param.state().stage();
  }
  for (int i = 0; i < out.param.layer_size(); ++i) {
    caffe::LayerParameter* layer = out.param.mutable_layer(i);
    if (layer->type() != "Data" || !KeptIn(*layer, merged)) continue;
    const std::string where = LayerPlace(source, lines, i, *layer);
    PSTRAIN_RETURN_IF_ERROR(ReplaceDataLayer(layer, merged.phase()).WithContext(where));
  }
  out.layer_lines = std::move(lines);
  return out;
}

Result<NetWithoutData> ReadNetWithoutData(const std::string& path, const caffe::NetState& state) {
  caffe::NetParameter param;
  std::vector<int> lines;
  PSTRAIN_RETURN_IF_ERROR(ReadTextProtoWithLines(path, &param, "layer", &lines));
  if (param.layer_size() == 0 && param.layers_size() > 0) {  // V1 form
    PSTRAIN_RETURN_IF_ERROR(ReadTextProtoWithLines(path, &param, "layers", &lines));
  }
  return NetParamWithoutData(param, path, state, std::move(lines));
}

Result<SolverCheck> CheckSolver(const std::string& solver_path, const SolverCheckOptions& options) {
  TrainerOptions trainer_options;
  trainer_options.engine = options.engine;
  trainer_options.without_data = true;
  trainer_options.weights = options.weights;
  trainer_options.write_snapshots = false;
  PSTRAIN_ASSIGN_OR_RETURN(auto trainer, Trainer::FromFile(solver_path, trainer_options));
  SolverCheck check;
  const Net& net = trainer->net();
  check.train_net = net.name();
  check.train_layers = static_cast<int>(net.layers().size());
  for (const auto& p : net.learnable_params()) check.learnable_values += p.blob->count();
  check.test_nets = trainer->solver().test_iter_size();
  check.outputs = net.output_blob_names();
  for (size_t i = 0; i < net.layers().size(); ++i) {
    if (std::string(net.layers()[i]->type()) != "Input") continue;
    const auto& tops = net.top_vecs()[i];
    for (size_t t = 0; t < tops.size(); ++t) {
      std::string shape;
      for (int d : tops[t]->shape()) shape += (shape.empty() ? "" : "x") + std::to_string(d);
      check.inputs.push_back(net.blob_names()[net.top_ids(static_cast<int>(i))[t]] + " " + shape);
    }
  }
  return check;
}

}  // namespace pstrain

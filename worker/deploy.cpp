#include "worker/deploy.hpp"

#include <map>
#include <set>
#include <string>

namespace pstrain {
namespace {

bool IsDataLayer(const std::string& type) {
  return type == "Data" || type == "ImageData" || type == "HDF5Data" || type == "MemoryData" ||
         type == "WindowData" || type == "DummyData" || type == "Input";
}

bool IsLossOrMetric(const std::string& type) {
  return type == "SoftmaxWithLoss" || type == "EuclideanLoss" ||
         type == "SigmoidCrossEntropyLoss" || type == "Accuracy" || type == "HingeLoss" ||
         type == "InfogainLoss" || type == "ContrastiveLoss" || type == "MultinomialLogisticLoss";
}

}  // namespace

Result<caffe::NetParameter> MakeDeployNet(const Net& net) {
  const caffe::NetParameter& source = net.param();
  // Undo the split layers: every split output is the split's input blob.
  std::map<std::string, std::string> unsplit;
  for (const auto& layer : source.layer()) {
    if (layer.type() != "Split") continue;
    for (const auto& top : layer.top()) unsplit[top] = layer.bottom(0);
  }
  const auto original = [&](const std::string& blob) {
    auto it = unsplit.find(blob);
    return it == unsplit.end() ? blob : it->second;
  };

  // Which blobs feed a layer that stays (walk backwards from the kept layers).
  std::vector<const caffe::LayerParameter*> kept;
  for (const auto& layer : source.layer()) {
    if (layer.type() == "Split" || IsLossOrMetric(layer.type())) continue;
    kept.push_back(&layer);
  }
  std::set<std::string> needed;
  std::vector<const caffe::LayerParameter*> compute;
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    const auto* layer = *it;
    if (IsDataLayer(layer->type())) continue;
    compute.insert(compute.begin(), layer);
    for (const auto& b : layer->bottom()) needed.insert(original(b));
  }
  if (compute.empty()) return Status::Error("net '" + net.name() + "' has no compute layers");

  caffe::NetParameter deploy;
  deploy.set_name(net.name());
  // One Input layer for every needed data top.
  caffe::LayerParameter input;
  input.set_name("input");
  input.set_type("Input");
  for (const auto* layer : kept) {
    if (!IsDataLayer(layer->type())) continue;
    for (const auto& top : layer->top()) {
      if (!needed.count(top)) continue;
      const Blob* blob = net.blob_by_name(top);
      if (blob == nullptr) return Status::Error("data blob '" + top + "' not found");
      input.add_top(top);
      caffe::BlobShape* shape = input.mutable_input_param()->add_shape();
      for (int a = 0; a < blob->num_axes(); ++a) shape->add_dim(a == 0 ? 1 : blob->shape(a));
    }
  }
  if (input.top_size() > 0) *deploy.add_layer() = input;
  for (const auto* layer : compute) {
    caffe::LayerParameter* out = deploy.add_layer();
    *out = *layer;
    out->clear_include();
    out->clear_exclude();
    out->clear_blobs();
    out->clear_phase();
    for (auto& b : *out->mutable_bottom()) b = original(b);
  }
  // A softmax loss becomes the "prob" output.
  for (const auto& layer : source.layer()) {
    if (layer.type() != "SoftmaxWithLoss" || layer.bottom_size() < 1) continue;
    caffe::LayerParameter* prob = deploy.add_layer();
    prob->set_name("prob");
    prob->set_type("Softmax");
    prob->add_bottom(original(layer.bottom(0)));
    prob->add_top("prob");
    if (layer.has_softmax_param()) *prob->mutable_softmax_param() = layer.softmax_param();
    break;
  }
  return deploy;
}

}  // namespace pstrain

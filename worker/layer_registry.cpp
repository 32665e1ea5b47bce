#include "worker/layer_registry.hpp"

#include <algorithm>
#include <cctype>
#include <set>

namespace pstrain {
namespace {

// Every layer type BVLC Caffe registers (src/caffe/layers/, 1.0 and master).
const std::set<std::string>& CaffeLayerTypes() {
  static const std::set<std::string> types = {"AbsVal",
                                              "Accuracy",
                                              "ArgMax",
                                              "BatchNorm",
                                              "BatchReindex",
                                              "Bias",
                                              "BNLL",
                                              "Clip",
                                              "Concat",
                                              "ContrastiveLoss",
                                              "Convolution",
                                              "Crop",
                                              "Data",
                                              "Deconvolution",
                                              "Dropout",
                                              "DummyData",
                                              "Eltwise",
                                              "ELU",
                                              "Embed",
                                              "EuclideanLoss",
                                              "Exp",
                                              "Filter",
                                              "Flatten",
                                              "HDF5Data",
                                              "HDF5Output",
                                              "HingeLoss",
                                              "Im2col",
                                              "ImageData",
                                              "InfogainLoss",
                                              "InnerProduct",
                                              "Input",
                                              "Log",
                                              "LRN",
                                              "LSTM",
                                              "LSTMUnit",
                                              "MemoryData",
                                              "MultinomialLogisticLoss",
                                              "MVN",
                                              "Parameter",
                                              "Pooling",
                                              "Power",
                                              "PReLU",
                                              "Python",
                                              "Reduction",
                                              "ReLU",
                                              "Reshape",
                                              "RNN",
                                              "Scale",
                                              "Sigmoid",
                                              "SigmoidCrossEntropyLoss",
                                              "Silence",
                                              "Slice",
                                              "Softmax",
                                              "SoftmaxWithLoss",
                                              "Split",
                                              "SPP",
                                              "Swish",
                                              "TanH",
                                              "Threshold",
                                              "Tile",
                                              "WindowData"};
  return types;
}

// Caffe's data layers that read something other than an LMDB.
bool IsOtherDataLayer(const std::string& type) {
  return type == "HDF5Data" || type == "ImageData" || type == "MemoryData" || type == "WindowData";
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Levenshtein distance, case-insensitive.
size_t EditDistance(const std::string& a_in, const std::string& b_in) {
  const std::string a = Lower(a_in), b = Lower(b_in);
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

LayerRegistry& LayerRegistry::Global() {
  static LayerRegistry* registry = new LayerRegistry();  // never destroyed: used at exit
  return *registry;
}

bool LayerRegistry::Add(const std::string& type, Factory factory) {
  PSTRAIN_CHECK_MSG(factories_.count(type) == 0, "layer type registered twice: " + type);
  factories_[type] = std::move(factory);
  return true;
}

std::string LayerRegistry::Closest(const std::string& type) const {
  std::string best;
  size_t best_distance = std::max<size_t>(1, type.size() / 3) + 1;
  for (const auto& [name, factory] : factories_) {
    const size_t d = EditDistance(type, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

Status LayerRegistry::UnknownType(const std::string& type) const {
  std::string known;
  for (const auto& [name, factory] : factories_) known += (known.empty() ? "" : ", ") + name;
  known = " (known types: " + known + ")";
  if (type.empty()) return Status::InvalidArgument("layer has no type" + known);
  if (CaffeLayerTypes().count(type) > 0) {
    std::string what = "layer type '" + type + "' is a Caffe layer type that PSTrain does not have";
    if (IsOtherDataLayer(type)) {
      what +=
          " yet; convert the data into an LMDB with ps-data (images, mnist) and read it "
          "with a Data layer";
    }
    return Status::InvalidArgument(what + known);
  }
  const std::string closest = Closest(type);
  if (!closest.empty()) {
    return Status::InvalidArgument("unknown layer type '" + type + "'; did you mean '" + closest +
                                   "'?" + known);
  }
  return Status::InvalidArgument("unknown layer type '" + type +
                                 "': not a Caffe layer type either (forks of Caffe, such as "
                                 "SSD, add types of their own)" +
                                 known);
}

Result<std::unique_ptr<Layer>> LayerRegistry::Create(const caffe::LayerParameter& param) const {
  auto it = factories_.find(param.type());
  if (it == factories_.end()) return UnknownType(param.type());
  return it->second(param);
}

std::vector<std::string> LayerRegistry::Types() const {
  std::vector<std::string> types;
  for (const auto& [name, factory] : factories_) types.push_back(name);
  return types;
}

}  // namespace pstrain

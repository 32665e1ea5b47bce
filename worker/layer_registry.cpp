#include "worker/layer_registry.hpp"

namespace pstrain {

LayerRegistry& LayerRegistry::Global() {
  static LayerRegistry* registry = new LayerRegistry();  // never destroyed: used at exit
  return *registry;
}

bool LayerRegistry::Add(const std::string& type, Factory factory) {
  PSTRAIN_CHECK_MSG(factories_.count(type) == 0, "layer type registered twice: " + type);
  factories_[type] = std::move(factory);
  return true;
}

Result<std::unique_ptr<Layer>> LayerRegistry::Create(const caffe::LayerParameter& param) const {
  auto it = factories_.find(param.type());
  if (it == factories_.end()) {
    std::string known;
    for (const auto& [name, factory] : factories_) known += (known.empty() ? "" : ", ") + name;
    return Status::InvalidArgument("unknown layer type '" + param.type() +
                                   "' (known types: " + known + ")");
  }
  return it->second(param);
}

std::vector<std::string> LayerRegistry::Types() const {
  std::vector<std::string> types;
  for (const auto& [name, factory] : factories_) types.push_back(name);
  return types;
}

}  // namespace pstrain

// LayerRegistry: Caffe layer type name -> factory. Each layer file registers
// itself with PSTRAIN_REGISTER_LAYER, so adding a layer touches no other file.
// Registration happens during static initialisation; lookups after main()
// starts are read-only and thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class LayerRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Layer>(const caffe::LayerParameter&)>;

  static LayerRegistry& Global();

  // REQUIRES: `type` not registered yet (checked: a duplicate is our bug).
  bool Add(const std::string& type, Factory factory);
  // Error for an unknown type lists the known ones and says what the type
  // is: a misspelling of a known type ("did you mean 'Convolution'?", by edit
  // distance, case-insensitive), a Caffe layer type PSTrain lacks, or no
  // Caffe layer type at all (a fork's, such as SSD's PriorBox).
  Result<std::unique_ptr<Layer>> Create(const caffe::LayerParameter& param) const;
  std::vector<std::string> Types() const;
  // The registered type nearest to `type` when it is close enough to be a
  // misspelling (edit distance at most a third of its length, at least 1),
  // else "".
  std::string Closest(const std::string& type) const;

 private:
  Status UnknownType(const std::string& type) const;

  std::map<std::string, Factory> factories_;
};

}  // namespace pstrain

#define PSTRAIN_REGISTER_LAYER(type_name, Class)                                             \
  static const bool PSTRAIN_CONCAT(pstrain_layer_registered_, __LINE__) =                    \
      ::pstrain::LayerRegistry::Global().Add(type_name, [](const caffe::LayerParameter& p) { \
        return std::unique_ptr<::pstrain::Layer>(new Class(p));                              \
      })

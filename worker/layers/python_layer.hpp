// Python layer ("Python"): a layer written in Python (Caffe's PythonLayer).
//
// python_param: module and layer name a class, importable by the process,
// that subclasses pstrain.caffe.Layer (or caffe.Layer under the opt-in alias);
// param_str is handed to it verbatim. The object gets `param_str`, `phase`
// (0 TRAIN, 1 TEST), `rank` and `num_workers` (its worker and how many there
// are; 0 and 1 in a single process) before its setup(bottom, top); then
// reshape(bottom, top), forward(bottom, top) and backward(top, propagate_down,
// bottom) run in the layer's slots, on the CPU (under the GPU engine the blobs
// synchronise to the host around it). Blobs the object adds to self.blobs in
// setup are learnable parameters like any other layer's.
//
// The interpreter is reached through a PythonLayerBridge that the process
// installs: the pstrain._core extension module does it when it is imported;
// ps-net and ps-worker start an embedded interpreter on the first Python
// layer they build (worker/python_embed.hpp), which imports that module. A
// Python exception in setup or reshape fails the set-up, in forward or
// backward it becomes the layer's RuntimeStatus; each names the module, the
// class, the method and the exception.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class PythonLayer;

// The Python object behind one Python layer. Every call holds the
// interpreter's lock for its own duration; errors are returned, never thrown.
class PythonLayerObject {
 public:
  virtual ~PythonLayerObject() = default;
  virtual Status Setup(const BlobVec& bottom, const BlobVec& top) = 0;
  virtual Status Reshape(const BlobVec& bottom, const BlobVec& top) = 0;
  virtual Status Forward(const BlobVec& bottom, const BlobVec& top) = 0;
  virtual Status Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                          const BlobVec& bottom) = 0;
};

// Makes the Python object for a layer: imports python_param.module and
// instantiates python_param.layer. REQUIRES: `layer` outlives the object.
class PythonLayerBridge {
 public:
  virtual ~PythonLayerBridge() = default;
  virtual Result<std::unique_ptr<PythonLayerObject>> Create(PythonLayer* layer) = 0;
};

// Installs the process's bridge (the extension module, at import). Not
// owned; REQUIRES: it lives until the process ends. Thread-safe.
void SetPythonLayerBridge(PythonLayerBridge* bridge);
// Called when a Python layer is built and no bridge is installed yet: it
// must install one (ps-net and ps-worker start an embedded interpreter). Set
// once, at start-up, by programs that link worker/python_embed.
void SetPythonLayerBridgeLoader(std::function<Status()> loader);

class PythonLayer : public Layer {
 public:
  explicit PythonLayer(const caffe::LayerParameter& param) : Layer(param) {}
  ~PythonLayer() override;

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Python"; }
  Status RuntimeStatus() const override { return runtime_status_; }
  // The Python object (null before set-up).
  PythonLayerObject* object() const { return object_.get(); }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;

 private:
  std::unique_ptr<PythonLayerObject> object_;
  Status runtime_status_;
};

}  // namespace pstrain

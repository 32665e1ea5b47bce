#include "worker/layers/python_layer.hpp"

#include <mutex>
#include <utility>

#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

// The process's bridge and the loader that makes one: set by the extension
// module or the programs, read when a Python layer is built.
struct BridgeSlot {
  std::mutex mutex;
  PythonLayerBridge* bridge = nullptr;
  std::function<Status()> loader;
};

BridgeSlot& Slot() {
  static BridgeSlot slot;
  return slot;
}

Result<PythonLayerBridge*> Bridge() {
  BridgeSlot& slot = Slot();
  std::function<Status()> loader;
  {
    std::lock_guard<std::mutex> lock(slot.mutex);
    if (slot.bridge != nullptr) return slot.bridge;
    loader = slot.loader;
  }
  if (!loader) {
    return Status::FailedPrecondition(
        "this program cannot run Python layers (no Python interpreter: use ps-net, ps-worker or "
        "pstrain.caffe)");
  }
  PSTRAIN_RETURN_IF_ERROR(loader());  // installs the bridge (outside the lock: it imports)
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (slot.bridge == nullptr) {
    return Status::FailedPrecondition("the embedded Python interpreter installed no layer bridge");
  }
  return slot.bridge;
}

}  // namespace

void SetPythonLayerBridge(PythonLayerBridge* bridge) {
  std::lock_guard<std::mutex> lock(Slot().mutex);
  Slot().bridge = bridge;
}

void SetPythonLayerBridgeLoader(std::function<Status()> loader) {
  std::lock_guard<std::mutex> lock(Slot().mutex);
  Slot().loader = std::move(loader);
}

PythonLayer::~PythonLayer() = default;

Status PythonLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const caffe::PythonParameter& p = param_.python_param();
  if (p.module().empty() || p.layer().empty()) {
    return Status::InvalidArgument("python_param needs both module and layer");
  }
  PSTRAIN_ASSIGN_OR_RETURN(PythonLayerBridge * bridge, Bridge());
  PSTRAIN_ASSIGN_OR_RETURN(object_, bridge->Create(this));
  return object_->Setup(bottom, top);
}

Status PythonLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  return object_->Reshape(bottom, top);
}

void PythonLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  // Each forward starts afresh (an exception ends that pass only, as in
  // pycaffe); within the pass the first error stands and the net stops on it.
  runtime_status_ = object_->Forward(bottom, top);
}

void PythonLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!runtime_status_.ok()) return;  // this pass's forward failed
  runtime_status_ = object_->Backward(top, propagate_down, bottom);
}

PSTRAIN_REGISTER_LAYER("Python", PythonLayer);

}  // namespace pstrain

// Layers from Python: handles of a net's layers (pycaffe's Layer: blobs,
// type, setup, reshape), the blob list a layer owns (with add_blob, which
// Python layers use for parameters of their own), and the bridge that runs
// Python layers for the engine (worker/layers/python_layer.hpp).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "python/ext/bindings.hpp"
#include "worker/layers/python_layer.hpp"

namespace pstrain::python {
namespace {

struct LayerHandle {
  Layer* layer = nullptr;
};

// The learnable blobs a layer owns, as a Python sequence.
struct LayerBlobs {
  Layer* layer = nullptr;
};

BlobVec BlobsOf(const nb::handle& list) {
  BlobVec blobs;
  for (nb::handle item : list) blobs.push_back(nb::cast<BlobHandle&>(item).blob);
  return blobs;
}

std::string TypeName(const nb::handle& object) {
  return nb::cast<std::string>(
      nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(object.ptr()))).attr("__name__"));
}

// "ValueError: bad shape (at my_layer.py:12 in forward)".
std::string DescribePythonError(const nb::python_error& error) {
  std::string text = TypeName(error.value()) + ": " + nb::cast<std::string>(nb::str(error.value()));
  nb::handle tb = error.traceback();
  nb::handle last;
  for (nb::handle t = tb; t.is_valid() && !t.is_none(); t = t.attr("tb_next")) last = t;
  if (last.is_valid()) {
    nb::object code = last.attr("tb_frame").attr("f_code");
    text += " (at " + nb::cast<std::string>(code.attr("co_filename")) + ":" +
            std::to_string(nb::cast<int>(last.attr("tb_lineno"))) + " in " +
            nb::cast<std::string>(code.attr("co_name")) + ")";
  }
  return text;
}

// One Python layer's object. Calls take the GIL for their own duration.
class PyLayerObject : public PythonLayerObject {
 public:
  PyLayerObject(nb::object self, std::string where)
      : self_(std::move(self)), where_(std::move(where)) {}
  ~PyLayerObject() override {
    if (!Py_IsInitialized()) {
      self_.release();  // the interpreter is gone; so is the object
      return;
    }
    nb::gil_scoped_acquire gil;
    self_.reset();
  }

  Status Setup(const BlobVec& bottom, const BlobVec& top) override {
    return Call("setup", [&] { self_.attr("setup")(BlobList(bottom), BlobList(top)); });
  }
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override {
    return Call("reshape", [&] { self_.attr("reshape")(BlobList(bottom), BlobList(top)); });
  }
  Status Forward(const BlobVec& bottom, const BlobVec& top) override {
    return Call("forward", [&] { self_.attr("forward")(BlobList(bottom), BlobList(top)); });
  }
  Status Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                  const BlobVec& bottom) override {
    return Call("backward", [&] {
      nb::list down;
      for (bool d : propagate_down) down.append(nb::bool_(d));
      self_.attr("backward")(BlobList(top), down, BlobList(bottom));
    });
  }
  nb::handle self() const { return self_; }

 private:
  template <typename F>
  Status Call(const char* method, F&& body) {
    nb::gil_scoped_acquire gil;
    try {
      body();
      return Status::Ok();
    } catch (nb::python_error& e) {
      const std::string what = where_ + ": " + method + " raised " + DescribePythonError(e);
      KeepLayerError(e, what);
      return Status::InvalidArgument(what);
    } catch (const std::exception& e) {
      return Status::InvalidArgument(where_ + ": " + method + " failed: " + e.what());
    }
  }

  nb::object self_;
  std::string where_;  // "python_param module 'm' layer 'C'"
};

class PyLayerBridge : public PythonLayerBridge {
 public:
  Result<std::unique_ptr<PythonLayerObject>> Create(PythonLayer* layer) override {
    const caffe::PythonParameter& p = layer->layer_param().python_param();
    const std::string where = "python_param module '" + p.module() + "' layer '" + p.layer() + "'";
    nb::gil_scoped_acquire gil;
    try {
      nb::object module = nb::module_::import_(p.module().c_str());
      if (!nb::hasattr(module, p.layer().c_str())) {
        return Status::InvalidArgument(where + ": module '" + p.module() + "' (" +
                                       nb::cast<std::string>(nb::str(module.attr("__file__"))) +
                                       ") has no '" + p.layer() + "'");
      }
      std::string bytes;
      layer->layer_param().SerializeToString(&bytes);
      nb::object pb2 = nb::module_::import_("pstrain.caffe.proto.caffe_pb2");
      nb::object param =
          pb2.attr("LayerParameter").attr("FromString")(nb::bytes(bytes.data(), bytes.size()));
      nb::object self = module.attr(p.layer().c_str())(param);
      self.attr("param_str") = nb::str(p.param_str().c_str(), p.param_str().size());
      self.attr("phase") = nb::int_(static_cast<int>(layer->phase()));
      self.attr("rank") = nb::int_(layer->context().rank);
      self.attr("num_workers") = nb::int_(layer->context().world_size);
      self.attr("blobs") = nb::cast(LayerBlobs{layer});
      return std::unique_ptr<PythonLayerObject>(new PyLayerObject(std::move(self), where));
    } catch (nb::python_error& e) {
      const std::string what = where + ": " + DescribePythonError(e);
      KeepLayerError(e, what);
      return Status::InvalidArgument(what);
    }
  }
};

}  // namespace

nb::handle PythonLayerSelf(Layer* layer) {
  auto* python = dynamic_cast<PythonLayer*>(layer);
  if (python == nullptr || python->object() == nullptr) return nb::handle();
  return static_cast<PyLayerObject*>(python->object())->self();
}

nb::object LayerObject(Layer* layer, nb::handle owner) {
  nb::handle self = PythonLayerSelf(layer);
  if (self.is_valid()) return nb::borrow(self);
  nb::object handle = nb::cast(LayerHandle{layer});
  nb::keep_alive_obj(handle, owner);
  return handle;
}

void InstallPythonLayerBridge() {
  static PyLayerBridge bridge;  // lives as long as the process: the engine holds it
  SetPythonLayerBridge(&bridge);
}

void BindLayer(nb::module_& m) {
  nb::class_<LayerBlobs>(m, "LayerBlobs", "The learnable blobs a layer owns.")
      .def("__len__", [](const LayerBlobs& b) { return b.layer->blobs().size(); })
      .def(
          "__getitem__",
          [](const LayerBlobs& b, long long i) {
            const long long n = static_cast<long long>(b.layer->blobs().size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) throw nb::index_error("layer blob index out of range");
            return BlobHandle{b.layer->blobs()[i].get()};
          },
          nb::keep_alive<0, 1>())
      .def(
          "add_blob",
          [](LayerBlobs& b, const nb::args& args) {
            b.layer->blobs().push_back(std::make_shared<Blob>(ShapeFromArgs(args, "add_blob")));
          },
          "Appends a blob of the given shape (a parameter of a Python layer).");

  nb::class_<LayerHandle>(m, "Layer", nb::dynamic_attr(), "A layer of a net.")
      .def_prop_ro("type", [](const LayerHandle& l) { return std::string(l.layer->type()); })
      .def_prop_ro(
          "implementation", [](const LayerHandle& l) { return l.layer->Implementation(); },
          "What forward and backward run (ps-net time's last column): 'reference', a CPU "
          "implementation, 'gpu', 'cudnn-...', 'fused'.")
      .def_prop_ro(
          "blobs", [](const LayerHandle& l) { return LayerBlobs{l.layer}; }, nb::keep_alive<0, 1>())
      .def("setup",
           [](LayerHandle& l, const nb::list& bottom, const nb::list& top) {
             ThrowIfError(l.layer->LayerSetUp(BlobsOf(bottom), BlobsOf(top)));
           })
      .def("reshape", [](LayerHandle& l, const nb::list& bottom, const nb::list& top) {
        ThrowIfError(l.layer->Reshape(BlobsOf(bottom), BlobsOf(top)));
      });
}

}  // namespace pstrain::python

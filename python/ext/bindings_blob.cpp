// Blob: shape, counts, reshape, and numpy views of data and diff (pycaffe's
// Blob). Reading .data makes the host copy current and marks it the newest
// (SyncedMemory's mutable_cpu_data), as pycaffe's view does, so a write
// through the view is what the next forward sees on either engine.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "python/ext/bindings.hpp"

namespace pstrain::python {
namespace {

#ifdef PSTRAIN_HAVE_CUDA
// DLPack hand-off of device memory (PyTorch's torch.from_dlpack, CuPy's
// cupy.from_dlpack): no copy; the capsule holds the memory.
nb::object BlobDeviceArray(Blob* blob, bool diff) {
  std::shared_ptr<SyncedMemory> memory =
      diff ? blob->shared_diff_memory() : blob->shared_data_memory();
  float* ptr = diff ? blob->mutable_gpu_diff() : blob->mutable_gpu_data();
  auto* holder = new std::shared_ptr<SyncedMemory>(std::move(memory));
  nb::capsule owner(
      holder, [](void* p) noexcept { delete static_cast<std::shared_ptr<SyncedMemory>*>(p); });
  std::vector<size_t> shape(blob->shape().begin(), blob->shape().end());
  const int device = CurrentSettings().device;
  return nb::cast(nb::ndarray<float, nb::c_contig>(ptr, shape.size(), shape.data(), owner, nullptr,
                                                   nb::dtype<float>(), nb::device::cuda::value,
                                                   device));
}
#endif

void CheckCount(const std::vector<int>& shape, const char* what) {
  int64_t count = 1;
  for (int d : shape) {
    count *= d;
    if (count > kMaxBlobValues) {
      throw std::invalid_argument(std::string(what) + ": more than " +
                                  std::to_string(kMaxBlobValues) + " values");
    }
  }
}

}  // namespace

std::vector<int> ShapeFromArgs(const nb::args& args, const char* what) {
  std::vector<int> shape;
  // Blob.reshape(2, 3) and Blob.reshape((2, 3)) both work.
  nb::handle source = args;
  if (args.size() == 1 && !nb::isinstance<nb::int_>(args[0])) source = args[0];
  for (nb::handle d : source) {
    const long long v = nb::cast<long long>(d);
    if (v < 0 || v > kMaxBlobValues) {
      throw std::invalid_argument(std::string(what) + ": dimension " + std::to_string(v) +
                                  " is out of range");
    }
    shape.push_back(static_cast<int>(v));
  }
  if (shape.size() > static_cast<size_t>(Blob::kMaxAxes)) {
    throw std::invalid_argument(std::string(what) + ": at most " + std::to_string(Blob::kMaxAxes) +
                                " axes");
  }
  CheckCount(shape, what);
  return shape;
}

nb::object BlobArray(Blob* blob, bool diff) {
  std::vector<size_t> shape(blob->shape().begin(), blob->shape().end());
  if (blob->count() == 0) {
    static float empty = 0.f;
    return nb::cast(nb::ndarray<nb::numpy, float, nb::c_contig>(&empty, shape.size(), shape.data(),
                                                                nb::handle()));
  }
  float* ptr = diff ? blob->mutable_cpu_diff() : blob->mutable_cpu_data();
  std::shared_ptr<SyncedMemory> memory =
      diff ? blob->shared_diff_memory() : blob->shared_data_memory();
  auto* holder = new std::shared_ptr<SyncedMemory>(std::move(memory));
  nb::capsule owner(
      holder, [](void* p) noexcept { delete static_cast<std::shared_ptr<SyncedMemory>*>(p); });
  return nb::cast(
      nb::ndarray<nb::numpy, float, nb::c_contig>(ptr, shape.size(), shape.data(), owner));
}

nb::list BlobList(const BlobVec& blobs) {
  nb::list list;
  for (Blob* b : blobs) list.append(nb::cast(BlobHandle{b}));
  return list;
}

void BindBlob(nb::module_& m) {
  nb::class_<BlobHandle>(m, "Blob", nb::dynamic_attr(),
                         "A blob of a net: data and diff as numpy views of its memory.")
      .def_prop_ro("shape", [](const BlobHandle& b) { return b.blob->shape(); })
      .def_prop_ro("count", [](const BlobHandle& b) { return b.blob->count(); })
      .def_prop_ro("num", [](const BlobHandle& b) { return b.blob->num(); })
      .def_prop_ro("channels", [](const BlobHandle& b) { return b.blob->channels(); })
      .def_prop_ro("height", [](const BlobHandle& b) { return b.blob->height(); })
      .def_prop_ro("width", [](const BlobHandle& b) { return b.blob->width(); })
      .def_prop_ro("data", [](const BlobHandle& b) { return BlobArray(b.blob, false); })
      .def_prop_ro("diff", [](const BlobHandle& b) { return BlobArray(b.blob, true); })
      .def(
          "reshape",
          [](BlobHandle& b, const nb::args& args, const nb::kwargs& kwargs) {
            if (kwargs.size() > 0) throw std::invalid_argument("Blob.reshape takes no keywords");
            b.blob->Reshape(ShapeFromArgs(args, "Blob.reshape"));
          },
          "Changes the shape (the memory is kept when the new count fits).")
      .def("__repr__", [](const BlobHandle& b) { return "<Blob " + b.blob->shape_string() + ">"; })
#ifdef PSTRAIN_HAVE_CUDA
      .def_prop_ro("gpu_data", [](const BlobHandle& b) { return BlobDeviceArray(b.blob, false); })
      .def_prop_ro("gpu_diff", [](const BlobHandle& b) { return BlobDeviceArray(b.blob, true); })
      .def_prop_ro("_gpu_data_ptr",
                   [](const BlobHandle& b) {
                     return reinterpret_cast<uintptr_t>(b.blob->mutable_gpu_data());
                   })
      .def_prop_ro("_gpu_diff_ptr",
                   [](const BlobHandle& b) {
                     return reinterpret_cast<uintptr_t>(b.blob->mutable_gpu_diff());
                   })
#endif
      ;
}

}  // namespace pstrain::python

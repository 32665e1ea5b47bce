// Fuzz target "net_prototxt": a text prototxt through the net builder, as
// ps-net and the trainer take it: TextFormat parse (errors name line and
// column), format upgrades, phase filtering, split insertion, every layer's
// set-up through the registry, then one forward and backward pass on the
// CPU reference path when the net has no data layer reading files.
//
// Nets with a layer that writes files at set-up (HDF5Output) are not built.
// Blobs are bounded (NetContext::max_blob_values, 1 << 20 values here), so a
// prototxt asking for a huge shape is refused with an error naming the layer
// rather than exhausting memory. Properties: Net::Create returns a net or an
// error (ASan/UBSan watch the rest); a built net's runtime status after the
// pass is Ok or an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/proto_io.hpp"
#include "worker/net.hpp"

namespace {

constexpr int64_t kMaxBlobValues = int64_t{1} << 20;

// Layers that read files or start threads: set-up only for nets holding them.
bool ReadsData(const caffe::NetParameter& param) {
  for (const auto& layer : param.layer()) {
    const std::string& t = layer.type();
    if (t == "Data" || t == "ImageData" || t == "HDF5Data" || t == "WindowData") return true;
  }
  return param.layers_size() > 0;  // V1 nets: checked by the upgrade, not run
}

// Layers that write files at set-up (HDF5Output creates its file_name): a
// made-up net must not write wherever its text says, so none is built.
bool WritesFiles(const caffe::NetParameter& param) {
  for (const auto& layer : param.layer()) {
    if (layer.type() == "HDF5Output") return true;
  }
  for (const auto& layer : param.layers()) {  // V1, upgraded by Net::Create
    if (layer.type() == caffe::V1LayerParameter::HDF5_OUTPUT) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  caffe::NetParameter param;
  if (!pstrain::ParseTextProto(text, "fuzz.prototxt", &param).ok()) return 0;
  const bool verbose = std::getenv("PSTRAIN_FUZZ_VERBOSE") != nullptr;
  if (WritesFiles(param)) {
    if (verbose) std::fprintf(stderr, "  not built: writes files\n");
    return 0;
  }
  pstrain::NetOptions options;
  options.source = "fuzz.prototxt";
  options.context.engine = pstrain::Engine::kReference;
  options.context.max_blob_values = kMaxBlobValues;
  auto net = pstrain::Net::Create(param, options);
  // What a seed reaches, one line each: "built" or why not, then "ran" (one
  // forward and backward, run-time status Ok), "ran: <error>" or why not run.
  if (verbose) std::fprintf(stderr, "  %s\n", net.ok() ? "built" : net.status().message().c_str());
  if (!net.ok()) return 0;
  if (ReadsData(param)) {
    if (verbose) std::fprintf(stderr, "  not run: reads data\n");
    return 0;
  }
  int64_t total = 0;
  for (const auto& layer_tops : net.value()->top_vecs()) {
    for (const pstrain::Blob* top : layer_tops) total += top->count();
  }
  if (total > kMaxBlobValues) {  // keep one pass cheap
    if (verbose)
      std::fprintf(stderr, "  not run: tops hold %lld values\n", static_cast<long long>(total));
    return 0;
  }
  net.value()->ForwardBackward();
  const pstrain::Status status = net.value()->RuntimeStatus();
  if (verbose)
    std::fprintf(stderr, "  ran%s%s\n", status.ok() ? "" : ": ", status.message().c_str());
  return 0;
}

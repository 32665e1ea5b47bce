// Fuzz target "caffemodel": a weights file through Net::CopyTrainedLayersFromFile
// on a small net (fuzz_util.hpp's kSmallNet), as --weights and a resume read
// them: binary NetParameter (or text with blobs), V1 upgrade, then weights
// copied by layer name with their shapes checked (legacy 4-D shapes included).
//
// Properties: the copy succeeds or fails with an error; a failed copy changes
// no weight (bit for bit); after a successful one every learnable blob holds
// the values of the last blob the file gives for its layer; the net runs
// (forward, backward) either way.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/proto_io.hpp"
#include "fuzz/fuzz_util.hpp"
#include "worker/net.hpp"

namespace {

std::unique_ptr<pstrain::Net> SmallNet() {
  caffe::NetParameter param;
  if (!pstrain::ParseTextProto(pstrain::fuzz::kSmallNet, "small net", &param).ok()) {
    pstrain::fuzz::Fail("fuzz_caffemodel", "the small net does not parse");
  }
  pstrain::NetOptions options;
  options.context.engine = pstrain::Engine::kReference;
  auto net = pstrain::Net::Create(param, options);
  if (!net.ok()) pstrain::fuzz::Fail("fuzz_caffemodel", net.status().message());
  return std::move(net).value();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pstrain::fuzz::ScratchFile(data, size, ".caffemodel");
  std::unique_ptr<pstrain::Net> net = SmallNet();
  std::vector<float> before;
  for (const auto& p : net->learnable_params()) {
    before.insert(before.end(), p.blob->cpu_data(), p.blob->cpu_data() + p.blob->count());
  }
  const pstrain::Status copied = net->CopyTrainedLayersFromFile(path);
  if (!copied.ok()) {
    std::vector<float> after;
    for (const auto& p : net->learnable_params()) {
      after.insert(after.end(), p.blob->cpu_data(), p.blob->cpu_data() + p.blob->count());
    }
    if (std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) != 0) {
      pstrain::fuzz::Fail("fuzz_caffemodel", "a refused file changed weights: " + copied.message());
    }
  }
  if (!copied.ok()) {
    net->ForwardBackward();
    return 0;
  }
  // What was copied: every blob of a layer the file names equals the file's.
  caffe::NetParameter file;
  if (!pstrain::ReadBinaryProto(path, &file).ok() || file.layers_size() > 0) {
    net->ForwardBackward();  // text, or V1 (upgraded first): not compared here
    return 0;
  }
  std::set<std::string> seen;  // a later layer of the same name wins
  for (int l = file.layer_size() - 1; l >= 0; --l) {
    const auto& layer = file.layer(l);
    pstrain::Layer* mine = net->layer_by_name(layer.name());
    if (mine == nullptr || layer.blobs_size() == 0 || !seen.insert(layer.name()).second) continue;
    for (int b = 0; b < layer.blobs_size() && b < static_cast<int>(mine->blobs().size()); ++b) {
      const auto& proto = layer.blobs(b);
      const pstrain::Blob& blob = *mine->blobs()[static_cast<size_t>(b)];
      if (proto.data_size() != blob.count()) continue;  // double_data files
      for (int64_t i = 0; i < blob.count(); ++i) {
        const float want = proto.data(static_cast<int>(i)), got = blob.cpu_data()[i];
        if (!(want == got) && !(want != want && got != got)) {
          pstrain::fuzz::Fail("fuzz_caffemodel", "layer " + layer.name() + " blob " +
                                                     std::to_string(b) + " was not copied");
        }
      }
    }
  }
  net->ForwardBackward();  // after the comparison: BatchNorm updates its statistics
  return 0;
}

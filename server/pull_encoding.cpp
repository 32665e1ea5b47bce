#include "server/pull_encoding.hpp"

#include <cstdio>
#include <string>

#include "common/transport/gradient_codec.hpp"

namespace pstrain::server {
namespace {

// "65520" for fp16, "3.3895e+38" for bf16: the smallest magnitude that rounds to infinity.
const char* RoundsToInfinity(pstrain::DataType dtype) {
  return dtype == pstrain::FLOAT16 ? "65520" : "3.3895e+38";
}

}  // namespace

Result<std::shared_ptr<const std::vector<float>>> PullEncoding::Encode(
    uint32_t id, pstrain::DataType dtype, const std::vector<float>& weights,
    const ShardLayout& layout) {
  const auto key = std::make_pair(id, static_cast<int>(dtype));
  if (auto it = encoded_.find(key); it != encoded_.end()) return it->second;
  auto words = std::make_shared<std::vector<float>>();
  const size_t bad = transport::EncodeHalves(dtype, weights.data(), weights.size(), words.get());
  if (bad < weights.size()) {
    const Chunk& chunk = layout.placement.chunk(id);
    char value[32];
    std::snprintf(value, sizeof(value), "%g", static_cast<double>(weights[bad]));
    const std::string name = pstrain::DataType_Name(dtype);
    return Status::FailedPrecondition(
        "weight " + layout.params[static_cast<size_t>(chunk.param)].name() + "[" +
        std::to_string(chunk.offset + static_cast<int64_t>(bad)) + "] = " + value + " is beyond " +
        name + "'s range (|w| < " + RoundsToInfinity(dtype) +
        " rounds to a finite value): it cannot be pulled as " + name + "; pull in " +
        (dtype == pstrain::FLOAT16 ? "bf16 or " : "") + "none");
  }
  encoded_.emplace(key, words);
  return std::shared_ptr<const std::vector<float>>(std::move(words));
}

}  // namespace pstrain::server

// Pieces the file-loader fuzz targets share: a scratch file per process that
// holds the current input (the loaders under test read paths, as the programs
// do), and the small net their weights and histories belong to.
#pragma once

#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace pstrain::fuzz {

// libprotobuf prints a line for every message that misses required fields;
// millions of them would only slow the fuzzer down (the programs' handling of
// library output is their own concern).
inline const bool kProtobufQuiet = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

// Writes `size` bytes to this process's scratch file (under $TMPDIR or /tmp)
// and returns its path; the file is overwritten by the next call and removed
// at exit.
inline std::string ScratchFile(const uint8_t* data, size_t size, const std::string& suffix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/pstrain_fuzz_" +
                     std::to_string(::getpid()) + suffix;
  // The file is removed when the process exits normally.
  static struct Remover {
    std::string path;
    ~Remover() {
      if (!path.empty()) std::remove(path.c_str());
    }
  } remover;
  remover.path = path;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

inline void Fail(const char* target, const std::string& what) {
  std::fprintf(stderr, "%s: property broken: %s\n", target, what.c_str());
  std::abort();
}

// A net with every kind of learnable blob the loaders meet: convolution
// (weights, bias), inner product, batch norm statistics and scale, so a
// .caffemodel or .solverstate input can match it by name and shape.
inline const char* kSmallNet = R"(
name: "fuzznet"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 1 dim: 6 dim: 6 } shape { dim: 2 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 2 kernel_size: 3
                            weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "ip1" type: "InnerProduct" bottom: "conv1" top: "ip1"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss" }
)";

}  // namespace pstrain::fuzz

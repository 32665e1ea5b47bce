// layer-cputime: median thread CPU time of one layer's Forward and Backward
// under each CPU implementation it offers, 1 thread, for one bottom shape.
// CPU time, not wall time: on a shared, overloaded machine the waits for a
// core do not count (cache pollution by the other processes still does).
//
//   build/bin/layer-cputime --layer "name: 'p' type: 'Pooling' pooling_param { pool: MAX
//       kernel_size: 3 stride: 2 }" --shape 10,96,55,55 [--iterations 15] [--impl vector]
//
// One line per implementation: name, the kernels' ISA variant, forward and
// backward medians in ms. --split also times the backward's two halves apart:
// "data" (the bottom gradient only, parameter gradients off) and "params"
// (parameter gradients only, no bottom gradient). PSTRAIN_CPU_ISA and
// ONEDNN_MAX_CPU_ISA lower the ISA.
#include <google/protobuf/text_format.h>
#include <time.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/math_cpu.hpp"
#include "common/rng.hpp"
#include "worker/layer_registry.hpp"
#include "worker/layers/cpu_kernel_isa.hpp"

namespace po = boost::program_options;
using namespace pstrain;

namespace {

double ThreadMs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Returns 1 with a message on stderr when the layer cannot run.
int TimeImplementation(const caffe::LayerParameter& param, const std::vector<int>& shape,
                       const std::string& impl, int iterations, bool split) {
  auto created = LayerRegistry::Global().Create(param);
  if (!created.ok()) {
    std::cerr << "layer-cputime: " << created.status().message() << "\n";
    return 1;
  }
  std::unique_ptr<Layer> layer = std::move(created.value());
  Blob bottom(shape);
  Blob top;
  Rng rng(1701);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  float* x = bottom.mutable_cpu_data();
  for (int64_t i = 0; i < bottom.count(); ++i) x[i] = uniform(rng.engine());
  const BlobVec bottoms{&bottom}, tops{&top};
  layer->set_engine(Engine::kFast);
  Status s = layer->SetUp(bottoms, tops);
  if (s.ok()) s = layer->SelectCpuImplementation(impl);
  if (!s.ok()) {
    std::cerr << "layer-cputime: " << s.message() << "\n";
    return 1;
  }
  float* dy = top.mutable_cpu_diff();
  for (int64_t i = 0; i < top.count(); ++i) dy[i] = uniform(rng.engine());
  const int num_params = static_cast<int>(layer->blobs().size());
  auto set_params = [&](bool on) {
    for (int p = 0; p < num_params; ++p) layer->set_param_propagate_down(p, on);
  };
  std::vector<double> forward, backward, data, params;
  for (int i = 0; i <= iterations; ++i) {  // the first is warm-up
    const double t0 = ThreadMs();
    layer->Forward(bottoms, tops);
    const double t1 = ThreadMs();
    layer->Backward(tops, {true}, bottoms);
    const double t2 = ThreadMs();
    double t3 = t2, t4 = t2;
    if (split) {
      set_params(false);
      layer->Backward(tops, {true}, bottoms);
      t3 = ThreadMs();
      set_params(true);
      layer->Backward(tops, {false}, bottoms);
      t4 = ThreadMs();
    }
    if (i == 0) continue;
    forward.push_back(t1 - t0);
    backward.push_back(t2 - t1);
    data.push_back(t3 - t2);
    params.push_back(t4 - t3);
  }
  std::printf("%-26s %-8s forward %9.3f ms  backward %9.3f ms", impl.c_str(),
              impl == "vector" ? CpuIsaName(LastKernelIsa()) : "-", Median(forward),
              Median(backward));
  if (split) std::printf(" (data %9.3f, params %9.3f)", Median(data), Median(params));
  std::printf("  (median of %d)\n", iterations);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string layer_text, shape_text, impl;
  int iterations = 15;
  bool split = false;
  po::options_description options("layer-cputime");
  options.add_options()("layer", po::value(&layer_text)->required(), "layer prototxt")(
      "shape", po::value(&shape_text)->required(), "bottom shape, e.g. 10,96,55,55")(
      "iterations", po::value(&iterations)->default_value(15), "timed iterations")(
      "impl", po::value(&impl), "one CPU implementation (default: each offered)")(
      "split", po::bool_switch(&split), "also time the bottom and the parameter gradients apart");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, options), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "layer-cputime: " << e.what() << "\n" << options;
    return 2;
  }
  caffe::LayerParameter param;
  if (!google::protobuf::TextFormat::ParseFromString(layer_text, &param)) {
    std::cerr << "layer-cputime: --layer is not a LayerParameter in text format\n";
    return 2;
  }
  std::vector<int> shape;
  std::stringstream ss(shape_text);
  for (std::string dim; std::getline(ss, dim, ',');) {
    try {
      shape.push_back(std::stoi(dim));
    } catch (const std::exception&) {
      std::cerr << "layer-cputime: --shape: '" << dim << "' is not a number\n";
      return 2;
    }
  }
  if (iterations < 1) {
    std::cerr << "layer-cputime: --iterations must be at least 1\n";
    return 2;
  }
  SetCpuThreads(1);
  std::vector<std::string> impls = {impl};
  if (impl.empty()) {
    auto created = LayerRegistry::Global().Create(param);
    if (!created.ok()) {
      std::cerr << "layer-cputime: " << created.status().message() << "\n";
      return 1;
    }
    Blob bottom(shape), top;
    Status s = created.value()->SetUp({&bottom}, {&top});
    if (!s.ok()) {
      std::cerr << "layer-cputime: " << s.message() << "\n";
      return 1;
    }
    impls = created.value()->CpuImplementations();
  }
  for (const std::string& name : impls) {
    if (TimeImplementation(param, shape, name, iterations, split) != 0) return 1;
  }
  return 0;
}

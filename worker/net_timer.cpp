#include "worker/net_timer.hpp"

#include <algorithm>
#include <chrono>
#include <set>

namespace pstrain {

std::vector<std::vector<bool>> TimedPropagateDown(const Net& net) {
  const auto& layers = net.layers();
  const size_t n = layers.size();
  std::vector<std::vector<bool>> propagate(n);
  std::set<const Blob*> needs_gradient;
  for (size_t i = 0; i < n; ++i) {
    bool any = !layers[i]->blobs().empty();
    for (size_t b = 0; b < net.bottom_vecs()[i].size(); ++b) {
      const bool need = layers[i]->AllowForceBackward(static_cast<int>(b)) &&
                        needs_gradient.count(net.bottom_vecs()[i][b]) > 0;
      propagate[i].push_back(need);
      any = any || need;
    }
    if (any) {
      for (const Blob* top : net.top_vecs()[i]) needs_gradient.insert(top);
    }
  }
  return propagate;
}

namespace {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t m = values.size();
  return m % 2 ? values[m / 2] : (values[m / 2 - 1] + values[m / 2]) / 2;
}

}  // namespace

Result<NetTime> TimeNet(Net& net, int iterations, const NetTimerOptions& options) {
  using Clock = std::chrono::steady_clock;
  const std::function<void()>& sync = options.sync;
  const auto& layers = net.layers();
  const size_t n = layers.size();
  const std::vector<std::vector<bool>> propagate = TimedPropagateDown(net);
  // wait: call sync after every layer (the per-layer rows' passes).
  const auto pass = [&](std::vector<double>* fwd, std::vector<double>* bwd, bool wait) {
    for (size_t i = 0; i < n; ++i) {
      auto start = Clock::now();
      layers[i]->Forward(net.bottom_vecs()[i], net.top_vecs()[i]);
      if (wait && sync) sync();
      if (fwd) (*fwd)[i] += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
    for (size_t k = n; k-- > 0;) {
      auto start = Clock::now();
      layers[k]->Backward(net.top_vecs()[k], propagate[k], net.bottom_vecs()[k]);
      if (wait && sync) sync();
      if (bwd) (*bwd)[k] += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
  };
  pass(nullptr, nullptr, true);  // warm-up: allocations, primitive creation
  std::vector<double> fwd(n, 0.0), bwd(n, 0.0), totals;
  for (int it = 0; it < iterations; ++it) {
    auto start = Clock::now();
    pass(&fwd, &bwd, true);
    totals.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  NetTime result;
  result.iterations = iterations;
  const double div = std::max(1, iterations);
  for (size_t i = 0; i < n; ++i) {
    result.layers.push_back({layers[i]->name(), layers[i]->type(), fwd[i] / div, bwd[i] / div,
                             layers[i]->Implementation()});
    result.forward_ms += fwd[i] / div;
    result.backward_ms += bwd[i] / div;
  }
  if (sync) {  // the totals from whole passes, one wait each
    const std::function<void()> whole = [&] { pass(nullptr, nullptr, false); };
    const auto run = [&]() -> Status {
      return options.run_whole_pass ? options.run_whole_pass(whole) : (whole(), Status::Ok());
    };
    PSTRAIN_RETURN_IF_ERROR(run());  // untimed: a CUDA graph is captured here
    sync();
    totals.clear();
    for (int it = 0; it < iterations; ++it) {
      auto start = Clock::now();
      PSTRAIN_RETURN_IF_ERROR(run());
      sync();
      totals.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    result.whole_passes = true;
  }
  double sum = 0;
  for (double t : totals) sum += t;
  result.total_ms = sum / div;
  result.median_total_ms = Median(totals);
  return result;
}

NetTime TimeNet(Net& net, int iterations, const std::function<void()>& sync) {
  NetTimerOptions options;
  options.sync = sync;
  Result<NetTime> t = TimeNet(net, iterations, options);
  PSTRAIN_CHECK_MSG(t.ok(), t.status().message());  // without run_whole_pass nothing fails
  return std::move(t).value();
}

void OverrideBatchSize(caffe::NetParameter* net, int batch) {
  for (auto& layer : *net->mutable_layer()) {
    if (layer.type() == "Input") {
      for (auto& shape : *layer.mutable_input_param()->mutable_shape()) {
        if (shape.dim_size() > 0) shape.set_dim(0, batch);
      }
    } else if (layer.type() == "DummyData") {
      auto* p = layer.mutable_dummy_data_param();
      for (auto& shape : *p->mutable_shape()) {
        if (shape.dim_size() > 0) shape.set_dim(0, batch);
      }
      for (int i = 0; i < p->num_size(); ++i) p->set_num(i, batch);
    } else if (layer.type() == "Data") {
      layer.mutable_data_param()->set_batch_size(batch);
    }
  }
}

}  // namespace pstrain

#include "worker/ps/sufficient_factors.hpp"

#include <algorithm>
#include <cstring>

#include "common/ps/sufficient_factors.hpp"

namespace pstrain {
namespace {

// Bytes PsClient::PushFactors sends in `dtype` for a weight of `cols` values
// a row, parameter `param` of `placement`: per shard holding its chunks, the
// rows they touch plus all columns, `samples` times.
int64_t FactorPushBytes(const KeyPlacement& placement, int param, int64_t samples, int64_t cols,
                        pstrain::DataType dtype) {
  std::vector<std::vector<uint32_t>> by_shard(static_cast<size_t>(placement.num_shards()));
  for (uint32_t id : placement.param_chunks(param)) {
    by_shard[static_cast<size_t>(placement.chunk(id).shard)].push_back(id);
  }
  int64_t bytes = 0;
  for (const auto& ids : by_shard) {
    if (!ids.empty()) bytes += FactorBytes(samples, SpanRows(placement, ids, cols), cols, dtype);
  }
  return bytes;
}

// The number of layers of `net` holding `blob`'s values among their own
// blobs. A layer sharing a weight by name has a Blob of its own on the
// owner's memory (Net::AppendParams), so the memory is compared.
int LayersHolding(const Net& net, const Blob* blob) {
  int n = 0;
  for (const auto& layer : net.layers()) {
    for (const auto& b : layer->blobs()) n += b->data_memory() == blob->data_memory() ? 1 : 0;
  }
  return n;
}

}  // namespace

std::unique_ptr<FactorCapture> FactorCapture::Create(const Net& net,
                                                     const std::vector<int>& ps_param_of_learnable,
                                                     int iter_size, const KeyPlacement& placement,
                                                     pstrain::DataType dtype, bool fewer_bytes) {
  std::unique_ptr<FactorCapture> capture(new FactorCapture());
  capture->net_ = &net;
  capture->weight_of_layer_.assign(net.layers().size(), -1);
  capture->weight_of_param_.assign(static_cast<size_t>(placement.num_params()), -1);
  const auto& learnable = net.learnable_params();
  for (size_t i = 0; i < learnable.size(); ++i) {
    const LearnableParam& p = learnable[i];
    const int param = ps_param_of_learnable[i];
    const Layer& layer = *net.layers()[static_cast<size_t>(p.layer_index)];
    if (param < 0 || p.index != 0 || !layer.Is("InnerProduct")) continue;
    if (p.blob->shape().size() != 2 || LayersHolding(net, p.blob) != 1) continue;
    Weight w;
    w.param = param;
    w.layer = p.layer_index;
    w.bottom = net.bottom_vecs()[static_cast<size_t>(w.layer)][0];
    w.top = net.top_vecs()[static_cast<size_t>(w.layer)][0];
    w.transpose = layer.layer_param().inner_product_param().transpose();
    w.rows = p.blob->shape(0);
    w.cols = p.blob->shape(1);
    const int64_t outputs = w.transpose ? w.cols : w.rows;
    const int64_t samples = w.top->count() / outputs * iter_size;
    // Both as they would travel in `dtype` (a 16-bit push halves both).
    const int64_t dense = FactorFrameBytes(dtype, w.rows * w.cols);
    const int64_t factored = FactorPushBytes(placement, param, samples, w.cols, dtype);
    if (samples == 0 || (fewer_bytes && factored >= dense)) continue;
    w.iteration_samples = samples;
    const int64_t inputs = w.transpose ? w.rows : w.cols;
    capture->summary_.push_back(p.layer + " (" + std::to_string(inputs) + " -> " +
                                std::to_string(outputs) + "): " + std::to_string(factored) +
                                " bytes instead of " + std::to_string(dense));
    capture->weight_of_layer_[static_cast<size_t>(w.layer)] =
        static_cast<int>(capture->weights_.size());
    capture->weight_of_param_[static_cast<size_t>(param)] =
        static_cast<int>(capture->weights_.size());
    capture->weights_.push_back(std::move(w));
  }
  if (capture->weights_.empty()) return nullptr;
  return capture;
}

FactorCapture::~FactorCapture() {
  if (skipping_ == nullptr) return;
  // Create took only weights that learn (PS parameters), whose layers
  // propagated to them before.
  for (const Weight& w : weights_) {
    skipping_->layers()[static_cast<size_t>(w.layer)]->set_param_propagate_down(0, true);
  }
}

void FactorCapture::SkipDenseGradients(Net* net) {
  PSTRAIN_CHECK(net == net_);
  skipping_ = net;
  for (const Weight& w : weights_) {
    net->layers()[static_cast<size_t>(w.layer)]->set_param_propagate_down(0, false);
  }
}

void FactorCapture::StartIteration() {
  for (Weight& w : weights_) w.samples = 0;
}

void FactorCapture::Captured(int layer) {
  const int index = weight_of_layer_[static_cast<size_t>(layer)];
  if (index < 0) return;
  Weight& w = weights_[static_cast<size_t>(index)];
  // Caffe's gradient: non-transposed W [out, in] gets top_diff^T bottom;
  // transposed W [in, out] gets bottom^T top_diff. On the GPU engine these
  // copy the blobs back from the device after the layer's backward.
  const float* top_diff = w.top->cpu_diff();
  const float* bottom = w.bottom->cpu_data();
  const float* left = w.transpose ? bottom : top_diff;
  const float* right = w.transpose ? top_diff : bottom;
  const int64_t m = w.top->count() / (w.transpose ? w.cols : w.rows);
  w.left.resize(static_cast<size_t>((w.samples + m) * w.rows));
  w.right.resize(static_cast<size_t>((w.samples + m) * w.cols));
  std::memcpy(w.left.data() + w.samples * w.rows, left, m * w.rows * sizeof(float));
  std::memcpy(w.right.data() + w.samples * w.cols, right, m * w.cols * sizeof(float));
  w.samples += m;
}

std::vector<FactorCapture::WeightShape> FactorCapture::shapes() const {
  std::vector<WeightShape> shapes;
  for (const Weight& w : weights_) shapes.push_back({w.param, w.rows, w.cols, w.iteration_samples});
  return shapes;
}

GradientFactors FactorCapture::factors(int param) const {
  const int index = weight_of_param_[static_cast<size_t>(param)];
  if (index < 0) return {};
  const Weight& w = weights_[static_cast<size_t>(index)];
  return {w.samples, w.left.data(), w.right.data()};
}

}  // namespace pstrain

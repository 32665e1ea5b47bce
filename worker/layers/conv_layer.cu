// Convolution on the GPU: cuDNN's convolution API. This is the one file that
// calls it: cuDNN 9 marks the whole legacy convolution API deprecated (the
// graph API replaces it), so the deprecation warnings are silenced here, and
// only here, between the LEGACY markers (docs/architecture.md says why the
// legacy calls stay).
//
// Per bottom shape the layer builds descriptors once (PrepareCudnn); the
// batch is cut into sub-batches when a tensor would exceed cuDNN's int
// element counts. Algorithms are chosen by measurement: the first time a
// (shape, direction) is seen on a device, cudnnFind*AlgorithmEx times every
// algorithm on the real inputs (outputs go to scratch memory) with a
// workspace of at most the limit, and the acceptable ones, fastest first, are
// cached for the process (ConvAlgoCache; identical layers share it).
// Acceptable (worker/layers/cudnn_algo_filter.hpp): succeeded, within the
// workspace limit, plain FP32 math (no TF32 tensor cores, which would miss
// the reference by ~1e-3) and, unless non-deterministic algorithms are
// allowed (GetCudnnDeterministic()), deterministic. Each call takes its
// workspace from the caching device allocator and returns it right after
// (layers share the cached blocks); when that allocation fails the next
// algorithm with a smaller workspace runs instead, down to one that needs
// none.
//
// With the graph API (GetCudnnConvApi(), worker/layers/cudnn_conv_api.hpp) a shape
// prepared afterwards runs through cuDNN's graph API instead: execution plans
// per (shape, direction), filtered and timed the same way
// (worker/layers/cudnn_graph_conv.hpp), cached per handle (GraphPlanCache);
// a direction without a plan, or a call with an operand less aligned than
// the plans assume, runs the legacy calls here.
//
// Settings (worker/layers/cudnn_conv_api.hpp, read when a shape is prepared):
//   GetCudnnDeterministic()  false: also accept non-deterministic algorithms
//                            (ps-net --nondeterministic, PSTRAIN_CUDNN_NONDETERMINISTIC=1)
//   GetCudnnConvApi()        legacy or graph (ps-net --cudnn-api, PSTRAIN_CUDNN_API)
// and, read once per process from the environment:
//   PSTRAIN_CUDNN_WORKSPACE_MB=<n>     workspace limit per call (default 1024)
// The bias is added and its gradient summed by own kernels (GpuChannelSum,
// deterministic, in double as the reference does).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "common/cuda/device_allocator.hpp"
#include "worker/layers/conv_layer.hpp"
#include "worker/layers/cudnn_algo_filter.hpp"
#include "worker/layers/cudnn_conv_api.hpp"
#include "worker/layers/cudnn_descriptors.hpp"
#include "worker/layers/cudnn_graph_conv.hpp"
#include "worker/layers/layer_kernels.cuh"

// LEGACY begin: cuDNN's deprecated convolution API.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace pstrain {
// Named, not anonymous: ConvolutionLayer::CudnnConv derives from
// CudnnConvState (a base in an anonymous namespace draws -Wsubobject-linkage).
namespace conv_cudnn {

using CudnnFilter = CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                                    cudnnDestroyFilterDescriptor>;
using CudnnConvolution =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                    cudnnDestroyConvolutionDescriptor>;

enum class ConvDirection { kForward, kBackwardData, kBackwardFilter };

struct ConvOptions {
  size_t workspace_limit = size_t{1024} << 20;
};

// A malformed value is reported on stderr, naming the variable, and the
// default kept.
ConvOptions ReadConvOptions() {
  ConvOptions options;
  if (const char* v = std::getenv("PSTRAIN_CUDNN_WORKSPACE_MB")) {
    char* end = nullptr;
    const long long mb = std::strtoll(v, &end, 10);
    if (end != v && *end == '\0' && mb >= 0 && mb <= (1LL << 30)) {
      options.workspace_limit = static_cast<size_t>(mb) << 20;
    } else {
      std::fprintf(stderr,
                   "pstrain: PSTRAIN_CUDNN_WORKSPACE_MB=%s is not a size in MiB; keeping "
                   "%zu MiB\n",
                   v, options.workspace_limit >> 20);
    }
  }
  return options;
}

const ConvOptions& Options() {
  static const ConvOptions options = ReadConvOptions();
  return options;
}

// Everything the measurement depends on.
struct ConvKey {
  int device, direction, n, c, h, w, k, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w,
      dilation_h, dilation_w, group;
  bool deterministic;
  size_t limit;

  auto Tie() const {
    return std::tie(device, direction, n, c, h, w, k, kernel_h, kernel_w, pad_h, pad_w, stride_h,
                    stride_w, dilation_h, dilation_w, group, deterministic, limit);
  }
  bool operator<(const ConvKey& o) const { return Tie() < o.Tie(); }
};

// What was measured per key in this process: the legacy path's algorithm
// lists, the graph path's plans. Thread-safe (mutex_ guards values_);
// measuring runs outside the lock, and when two threads measure the same key
// the first stored value wins, so every caller uses the same choice.
template <typename Key, typename Value>
class MeasuredCache {
 public:
  static MeasuredCache& Get() {
    static MeasuredCache* cache = new MeasuredCache;  // never destroyed: used until exit
    return *cache;
  }
  bool Find(const Key& key, Value* value) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = values_.find(key);
    if (it == values_.end()) return false;
    *value = it->second;
    return true;
  }
  Value Insert(const Key& key, Value value) {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.emplace(key, std::move(value)).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<Key, Value> values_;
};
using ConvAlgoCache = MeasuredCache<ConvKey, ConvAlgoList>;
// Graph plans run only on the handle they were built with: the key names it
// (GpuContext::cudnn_id), and the operands' alignment.
using GraphPlanKey = std::tuple<ConvKey, uint64_t, int64_t>;
using GraphPlanCache = MeasuredCache<GraphPlanKey, std::shared_ptr<const GraphConvPlans>>;

// Keeps the acceptable entries of cuDNN's perf results (fastest first;
// FilterConvAlgorithms) and counts them (GetCudnnAlgoCounts).
template <typename Perf>
ConvAlgoList Acceptable(const std::vector<Perf>& perf, int count, size_t limit,
                        bool deterministic) {
  std::vector<ConvAlgoCandidate> measured;
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    measured.push_back({static_cast<int>(p.algo), p.status == CUDNN_STATUS_SUCCESS, p.memory,
                        p.mathType == CUDNN_TENSOR_OP_MATH ||
                            p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION,
                        p.determinism == CUDNN_DETERMINISTIC});
  }
  ConvAlgoList list = FilterConvAlgorithms(measured, limit, !deterministic);
  int64_t nondeterministic = 0;
  for (const ConvAlgo& a : list) nondeterministic += a.deterministic ? 0 : 1;
  CountCudnnAlgoList(static_cast<int64_t>(list.size()), nondeterministic,
                     !list.empty() && !list.front().deterministic);
  return list;
}

// Device memory for one measurement or call, freed on scope exit.
class ScopedDeviceBuffer {
 public:
  ScopedDeviceBuffer() = default;
  ~ScopedDeviceBuffer() {
    if (ptr_ != nullptr) DeviceFree(ptr_);
  }
  ScopedDeviceBuffer(const ScopedDeviceBuffer&) = delete;
  ScopedDeviceBuffer& operator=(const ScopedDeviceBuffer&) = delete;

  // False when the allocation failed (nothing held then).
  bool Allocate(size_t bytes) {
    if (bytes == 0) return true;
    Result<void*> r = TryDeviceAlloc(bytes);
    if (!r.ok()) return false;
    ptr_ = r.value();
    return true;
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// A workspace for measuring: the limit, halved while the allocation fails
// (down to none). Returns the size held.
size_t AllocateMeasureWorkspace(size_t limit, ScopedDeviceBuffer* buffer) {
  for (size_t bytes = limit; bytes > 0; bytes /= 2) {
    if (buffer->Allocate(bytes)) return bytes;
    if (bytes < (size_t{1} << 20)) break;
  }
  return 0;
}

// The largest power of two, at most 16, that divides every value (addresses
// or byte offsets).
int64_t AlignmentOf(std::initializer_list<uintptr_t> values) {
  int64_t a = 16;
  for (uintptr_t v : values) {
    while (a > 1 && v % static_cast<uintptr_t>(a) != 0) a /= 2;
  }
  return a;
}

// The cuDNN state of one bottom shape (ConvolutionLayer::CudnnConv).
struct CudnnConvState {
  int num = 0, height = 0, width = 0;  // the bottom shape all this is for
  int batch = 0;                       // images per cuDNN call (divides num)
  int64_t x_stride = 0, y_stride = 0;  // floats between sub-batches
  CudnnTensor x, y;
  CudnnFilter w;
  CudnnConvolution conv;
  ConvKey key{};  // direction filled in per use
  // Filled on first use of each direction.
  bool have[3] = {false, false, false};
  ConvAlgoList algos[3];
  // The graph API (GetCudnnConvApi() when the shape was prepared): plans per
  // direction, built on first use; algos[d] is then measured only for calls
  // that fall back to the legacy calls (no plan for the direction, or an
  // operand less aligned than the plans).
  bool graph = false;
  GraphConvShape shape;
  int64_t alignment = 16;  // bytes; a call with a less aligned operand runs legacy
  std::shared_ptr<const GraphConvPlans> plans[3];
  bool graph_failed[3] = {false, false, false};
  ConvAlgoList plan_list[3];  // {plan index, workspace}, fastest first
};

}  // namespace conv_cudnn

using conv_cudnn::Acceptable;
using conv_cudnn::AlignmentOf;
using conv_cudnn::AllocateMeasureWorkspace;
using conv_cudnn::ConvAlgoCache;
using conv_cudnn::ConvDirection;
using conv_cudnn::ConvKey;
using conv_cudnn::CudnnConvState;
using conv_cudnn::GraphPlanCache;
using conv_cudnn::GraphPlanKey;
using conv_cudnn::Options;
using conv_cudnn::ScopedDeviceBuffer;

struct ConvolutionLayer::CudnnConv : CudnnConvState {};

void ConvolutionLayer::CudnnConvDeleter::operator()(CudnnConv* conv) const { delete conv; }

namespace {

// The largest divisor of num whose sub-batch keeps both tensors within
// cuDNN's int element counts; 0 when one image alone is too large.
int SubBatch(int num, int64_t x_per_image, int64_t y_per_image) {
  const int64_t per_image = std::max(x_per_image, y_per_image);
  if (per_image > INT_MAX) return 0;
  const int64_t most = std::min<int64_t>(num, INT_MAX / std::max<int64_t>(per_image, 1));
  for (int64_t b = most; b > 1; --b) {
    if (num % b == 0) return static_cast<int>(b);
  }
  return 1;
}

// y[i] += bias[(i / spatial) % k].
template <typename Index>
__global__ void AddConvBias(Index n, Index k, Index spatial, const float* bias, float* y) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, n) { y[i] += bias[(i / spatial) % k]; }
}

}  // namespace

ConvolutionLayer::CudnnConv& ConvolutionLayer::PrepareCudnn() {
  if (cudnn_ && cudnn_->num == num_ && cudnn_->height == height_ && cudnn_->width == width_) {
    return *cudnn_;
  }
  cudnn_.reset();
  std::unique_ptr<CudnnConv, CudnnConvDeleter> c(new CudnnConv);
  c->num = num_;
  c->height = height_;
  c->width = width_;
  const int64_t x_per_image = static_cast<int64_t>(channels_) * height_ * width_;
  const int64_t y_per_image = static_cast<int64_t>(geo_.num_output) * out_h_ * out_w_;
  c->batch = SubBatch(num_, x_per_image, y_per_image);
  PSTRAIN_CHECK_MSG(c->batch > 0, "Convolution '" + layer_param().name() +
                                      "': one image's input or output exceeds cuDNN's " +
                                      "2^31 - 1 elements");
  c->x_stride = c->batch * x_per_image;
  c->y_stride = c->batch * y_per_image;
  SetTensor4d(c->x, c->batch, channels_, height_, width_);
  SetTensor4d(c->y, c->batch, geo_.num_output, out_h_, out_w_);
  PSTRAIN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(c->w.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                 geo_.num_output, channels_ / geo_.group,
                                                 geo_.kernel_h, geo_.kernel_w));
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      c->conv.get(), geo_.pad_h, geo_.pad_w, geo_.stride_h, geo_.stride_w, geo_.dilation_h,
      geo_.dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(c->conv.get(), geo_.group));
  // Plain FP32 FMA kernels only, for measuring and for running.
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(c->conv.get(), CUDNN_FMA_MATH));
  int n = 0, ch = 0, h = 0, w = 0;
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(c->conv.get(), c->x.get(), c->w.get(),
                                                            &n, &ch, &h, &w));
  PSTRAIN_CHECK_MSG(n == c->batch && ch == geo_.num_output && h == out_h_ && w == out_w_,
                    "cuDNN's output size differs from the layer's");
  c->key = ConvKey{GpuContext::ForThisThread().device(),
                   0,
                   c->batch,
                   channels_,
                   height_,
                   width_,
                   geo_.num_output,
                   geo_.kernel_h,
                   geo_.kernel_w,
                   geo_.pad_h,
                   geo_.pad_w,
                   geo_.stride_h,
                   geo_.stride_w,
                   geo_.dilation_h,
                   geo_.dilation_w,
                   geo_.group,
                   GetCudnnDeterministic(),
                   Options().workspace_limit};
  c->graph = GetCudnnConvApi() == CudnnConvApi::kGraph;
  c->shape = GraphConvShape{c->batch,        channels_,     height_,         width_,
                            geo_.num_output, geo_.group,    geo_.kernel_h,   geo_.kernel_w,
                            out_h_,          out_w_,        geo_.pad_h,      geo_.pad_w,
                            geo_.stride_h,   geo_.stride_w, geo_.dilation_h, geo_.dilation_w};
  // Sub-batches start at these byte offsets from the blobs' starts.
  c->alignment = c->batch == num_
                     ? 16
                     : AlignmentOf({static_cast<uintptr_t>(sizeof(float) * c->x_stride),
                                    static_cast<uintptr_t>(sizeof(float) * c->y_stride)});
  cudnn_ = std::move(c);
  return *cudnn_;
}

namespace {

// The measured list for `direction`: from the process cache, or measured now
// on x (bottom data), w (weights) and dy (top diff, backward only); outputs go
// to scratch memory. Never empty: a measurement that leaves nothing
// acceptable falls back to one deterministic algorithm (below).
const ConvAlgoList& Algorithms(CudnnConvState& c, ConvDirection direction, const float* x,
                               const float* w, const float* dy, int64_t w_count) {
  const int d = static_cast<int>(direction);
  if (c.have[d]) return c.algos[d];
  ConvKey key = c.key;
  key.direction = d;
  ConvAlgoList list;
  if (!ConvAlgoCache::Get().Find(key, &list)) {
    cudnnHandle_t handle = GpuContext::ForThisThread().cudnn();
    const bool deterministic = key.deterministic;
    ScopedDeviceBuffer workspace, out;
    const size_t ws = AllocateMeasureWorkspace(key.limit, &workspace);
    int max_count = 0, count = 0;
    switch (direction) {
      case ConvDirection::kForward: {
        PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
        std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(max_count, 1));
        if (out.Allocate(sizeof(float) * c.y_stride)) {
          PSTRAIN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
              handle, c.x.get(), x, c.w.get(), w, c.conv.get(), c.y.get(), out.get(), max_count,
              &count, perf.data(), workspace.get(), ws));
        }
        list = Acceptable(perf, count, ws, deterministic);
        if (list.empty()) {  // implicit GEMM: deterministic, no workspace
          list.push_back({CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, 0});
          PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
              handle, c.x.get(), c.w.get(), c.conv.get(), c.y.get(),
              CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, &list.back().workspace));
        }
        break;
      }
      case ConvDirection::kBackwardData: {
        PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
        std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(std::max(max_count, 1));
        if (out.Allocate(sizeof(float) * c.x_stride)) {
          PSTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
              handle, c.w.get(), w, c.y.get(), dy, c.conv.get(), c.x.get(), out.get(), max_count,
              &count, perf.data(), workspace.get(), ws));
        }
        list = Acceptable(perf, count, ws, deterministic);
        if (list.empty()) {  // ALGO_1: deterministic
          list.push_back({CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, 0});
          PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
              handle, c.w.get(), c.y.get(), c.conv.get(), c.x.get(),
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, &list.back().workspace));
        }
        break;
      }
      case ConvDirection::kBackwardFilter: {
        PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count));
        std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(std::max(max_count, 1));
        if (out.Allocate(sizeof(float) * w_count)) {
          PSTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
              handle, c.x.get(), x, c.y.get(), dy, c.conv.get(), c.w.get(), out.get(), max_count,
              &count, perf.data(), workspace.get(), ws));
        }
        list = Acceptable(perf, count, ws, deterministic);
        if (list.empty()) {  // ALGO_1: deterministic
          list.push_back({CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, 0});
          PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
              handle, c.x.get(), c.y.get(), c.conv.get(), c.w.get(),
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, &list.back().workspace));
        }
        break;
      }
    }
    list = ConvAlgoCache::Get().Insert(key, std::move(list));
  }
  c.algos[d] = std::move(list);
  c.have[d] = true;
  return c.algos[d];
}

// The graph plans of `direction` (built on first use from the process cache,
// or measured on a and b with the output in scratch memory); null when cuDNN
// offers none for the shape: then the legacy calls serve that direction, and
// stderr says so once per layer and direction.
const GraphConvPlans* GraphPlans(CudnnConvState& c, ConvDirection direction,
                                 const std::string& layer, const float* a, const float* b,
                                 int64_t out_count) {
  const int d = static_cast<int>(direction);
  if (c.graph_failed[d]) return nullptr;
  if (c.plans[d] != nullptr) return c.plans[d].get();
  GpuContext& context = GpuContext::ForThisThread();
  cudnnHandle_t handle = context.cudnn();
  ConvKey key = c.key;
  key.direction = d;
  const GraphPlanKey cache_key{key, context.cudnn_id(), c.alignment};
  std::shared_ptr<const GraphConvPlans> plans;
  if (!GraphPlanCache::Get().Find(cache_key, &plans)) {
    ScopedDeviceBuffer workspace, out;
    GraphConvOptions options;
    options.deterministic = key.deterministic;
    options.workspace_limit = AllocateMeasureWorkspace(key.limit, &workspace);
    options.alignment = c.alignment;
    Result<std::unique_ptr<GraphConvPlans>> built =
        out.Allocate(sizeof(float) * out_count)
            ? GraphConvPlans::Build(handle, c.shape, static_cast<GraphConvDirection>(d), options, a,
                                    b, static_cast<float*>(out.get()), workspace.get())
            : Result<std::unique_ptr<GraphConvPlans>>(
                  Status::Error("no device memory for the measurement's output"));
    if (!built.ok()) {
      static const char* const kNames[3] = {"forward", "backward data", "backward filter"};
      std::fprintf(stderr, "pstrain: Convolution '%s' (%s): %s; using cuDNN's legacy calls\n",
                   layer.c_str(), kNames[d], built.status().message().c_str());
      c.graph_failed[d] = true;
      CountCudnnGraphFallback();  // this call; UseGraph counts the later ones
      return nullptr;
    }
    CountCudnnGraphPlanSet();
    plans = GraphPlanCache::Get().Insert(cache_key, std::move(built).value());
  }
  c.plans[d] = plans;
  c.plan_list[d].clear();
  for (int i = 0; i < plans->size(); ++i) c.plan_list[d].push_back({i, plans->workspace(i)});
  return plans.get();
}

// Runs run(algo, workspace, bytes) with the fastest algorithm whose
// workspace can be allocated; after a failed allocation only algorithms
// needing less are tried. Aborts when none can run (not even one needing no
// more than the failed sizes): the device is out of memory for this layer.
template <typename Run>
void RunWithWorkspace(const ConvAlgoList& list, const std::string& layer, Run run) {
  size_t failed = SIZE_MAX;  // every size at or above this failed
  for (const ConvAlgo& a : list) {
    if (a.workspace >= failed) continue;
    ScopedDeviceBuffer workspace;
    if (!workspace.Allocate(a.workspace)) {
      failed = a.workspace;
      continue;
    }
    run(a.algo, workspace.get(), a.workspace);
    return;
  }
  PSTRAIN_CHECK_MSG(false, "Convolution '" + layer + "': no cuDNN algorithm's workspace (" +
                               std::to_string(failed) + " bytes or less) could be allocated");
}

// Whether this call of `direction` runs a graph plan: the shape was prepared
// for the graph API, the direction has plans (or has not been tried), and
// every operand, at every sub-batch, is as aligned as the plans assume.
// Otherwise the legacy calls run it, counted as a fallback.
bool UseGraph(const CudnnConvState& c, ConvDirection direction,
              std::initializer_list<const void*> operands) {
  if (!c.graph) return false;
  int64_t alignment = 16;
  for (const void* p : operands) {
    alignment = std::min(alignment, AlignmentOf({reinterpret_cast<uintptr_t>(p)}));
  }
  if (!c.graph_failed[static_cast<int>(direction)] && alignment >= c.alignment) {
    return true;
  }
  CountCudnnGraphFallback();
  return false;
}

// Runs the fastest of `plans` whose workspace can be allocated. A plan that
// fails to run is a broken invariant (it ran when it was timed).
void RunGraph(const GraphConvPlans& plans, const ConvAlgoList& list, const std::string& layer,
              const float* a, const float* b, float* out) {
  cudnnHandle_t handle = GpuContext::ForThisThread().cudnn();
  RunWithWorkspace(list, layer, [&](int plan, void* ws, size_t) {
    const Status s = plans.Execute(handle, plan, a, b, out, ws);
    PSTRAIN_CHECK_MSG(s.ok(), "Convolution '" + layer + "': " + s.message());
  });
  CountCudnnGraphRun();
}

// One operand of a direction: its start and the floats between sub-batches
// (0 for the weights and their gradient, the same for every sub-batch).
struct Operand {
  const float* p;
  int64_t stride;
};

// Runs `direction` for every sub-batch through the graph plans (inputs a and
// b, output `out` of out_count floats per sub-batch); false when the legacy
// calls must run it instead (UseGraph, GraphPlans).
bool RunGraphSubBatches(CudnnConvState& c, ConvDirection direction, const std::string& layer,
                        int num, Operand a, Operand b, float* out, int64_t out_stride,
                        int64_t out_count) {
  if (!UseGraph(c, direction, {a.p, b.p, out})) return false;
  const GraphConvPlans* plans = GraphPlans(c, direction, layer, a.p, b.p, out_count);
  if (plans == nullptr) return false;
  const ConvAlgoList& list = c.plan_list[static_cast<int>(direction)];
  for (int n = 0; n < num; n += c.batch) {
    const int64_t sub = n / c.batch;
    RunGraph(*plans, list, layer, a.p + sub * a.stride, b.p + sub * b.stride,
             out + sub * out_stride);
  }
  return true;
}

}  // namespace

std::string ConvolutionLayer::GpuImplementation() const {
  if (!cudnn_) return "gpu";
  if (!cudnn_->graph) {
    // The algorithm each direction measured fastest (cuDNN's enum values).
    std::string text = "cudnn-legacy";
    const char* names[3] = {" fwd:", " bwd-data:", " bwd-filter:"};
    for (int d = 0; d < 3; ++d) {
      if (cudnn_->have[d] && !cudnn_->algos[d].empty()) {
        text += names[d] + std::to_string(cudnn_->algos[d].front().algo);
      }
    }
    return text;
  }
  const bool fell_back =
      cudnn_->graph_failed[0] || cudnn_->graph_failed[1] || cudnn_->graph_failed[2];
  return fell_back ? "cudnn-graph+legacy" : "cudnn-graph";
}

void ConvolutionLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (num_ == 0) return;
  CudnnConv& c = PrepareCudnn();
  cudnnHandle_t handle = GpuContext::ForThisThread().cudnn();
  const float* weights = blobs_[0]->gpu_data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    const float* x = bottom[i]->gpu_data();
    float* y = top[i]->mutable_gpu_data();
    if (!RunGraphSubBatches(c, ConvDirection::kForward, layer_param().name(), num_, {x, c.x_stride},
                            {weights, 0}, y, c.y_stride, c.y_stride)) {
      const ConvAlgoList& algos =
          Algorithms(c, ConvDirection::kForward, x, weights, nullptr, blobs_[0]->count());
      for (int b = 0; b < num_; b += c.batch) {
        const int64_t sub = b / c.batch;
        RunWithWorkspace(algos, layer_param().name(), [&](int algo, void* ws, size_t bytes) {
          PSTRAIN_CUDNN_CHECK(cudnnConvolutionForward(
              handle, CudnnOne(), c.x.get(), x + sub * c.x_stride, c.w.get(), weights, c.conv.get(),
              static_cast<cudnnConvolutionFwdAlgo_t>(algo), ws, bytes, CudnnZero(), c.y.get(),
              y + sub * c.y_stride));
        });
      }
    }
    if (geo_.bias_term) {
      const int64_t n = top[i]->count();
      const int64_t spatial = static_cast<int64_t>(out_h_) * out_w_;
      LaunchIndexed(n, AddConvBias<uint32_t>, AddConvBias<int64_t>, n, geo_.num_output, spatial,
                    blobs_[1]->gpu_data(), y);
    }
  }
}

void ConvolutionLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (num_ == 0) return;
  CudnnConv& c = PrepareCudnn();
  cudnnHandle_t handle = GpuContext::ForThisThread().cudnn();
  const bool weight_grad = param_propagate_down(0);
  const bool bias_grad = geo_.bias_term && param_propagate_down(1);
  const float* weights = blobs_[0]->gpu_data();
  const int64_t w_count = blobs_[0]->count();
  for (size_t i = 0; i < top.size(); ++i) {
    const float* dy = top[i]->gpu_diff();
    const float* x = bottom[i]->gpu_data();
    if (bias_grad) {
      GpuChannelSum(num_, geo_.num_output, static_cast<int64_t>(out_h_) * out_w_, dy, nullptr, true,
                    blobs_[1]->mutable_gpu_diff());
    }
    if (weight_grad) {
      float* dw = blobs_[0]->mutable_gpu_diff();
      if (!RunGraphSubBatches(c, ConvDirection::kBackwardFilter, layer_param().name(), num_,
                              {x, c.x_stride}, {dy, c.y_stride}, dw, 0, w_count)) {
        const ConvAlgoList& algos =
            Algorithms(c, ConvDirection::kBackwardFilter, x, weights, dy, w_count);
        for (int b = 0; b < num_; b += c.batch) {
          const int64_t sub = b / c.batch;
          RunWithWorkspace(algos, layer_param().name(), [&](int algo, void* ws, size_t bytes) {
            PSTRAIN_CUDNN_CHECK(
                cudnnConvolutionBackwardFilter(handle, CudnnOne(), c.x.get(), x + sub * c.x_stride,
                                               c.y.get(), dy + sub * c.y_stride, c.conv.get(),
                                               static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
                                               ws, bytes, CudnnOne(), c.w.get(), dw));
          });
        }
      }
    }
    if (propagate_down[i]) {
      float* dx = bottom[i]->mutable_gpu_diff();
      if (!RunGraphSubBatches(c, ConvDirection::kBackwardData, layer_param().name(), num_,
                              {weights, 0}, {dy, c.y_stride}, dx, c.x_stride, c.x_stride)) {
        const ConvAlgoList& algos =
            Algorithms(c, ConvDirection::kBackwardData, x, weights, dy, w_count);
        for (int b = 0; b < num_; b += c.batch) {
          const int64_t sub = b / c.batch;
          RunWithWorkspace(algos, layer_param().name(), [&](int algo, void* ws, size_t bytes) {
            PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(
                handle, CudnnOne(), c.w.get(), weights, c.y.get(), dy + sub * c.y_stride,
                c.conv.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws, bytes,
                CudnnZero(), c.x.get(), dx + sub * c.x_stride));
          });
        }
      }
    }
  }
}

}  // namespace pstrain

#pragma GCC diagnostic pop
// LEGACY end.

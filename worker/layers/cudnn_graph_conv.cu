// cuDNN graph (backend) API convolution plans: see cudnn_graph_conv.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <utility>

#include "worker/layers/cudnn_graph_conv.hpp"

namespace pstrain {
namespace {

// Unique ids of the operands in the variant packs.
constexpr int64_t kUidX = 1, kUidW = 2, kUidY = 3;

// At most this many engine configurations are finalized and timed per
// (shape, direction): heuristics list the likely fastest first, and each
// finalize and timing costs set-up time.
constexpr int kMaxCandidates = 12;

std::string LastError(cudnnStatus_t status) {
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  std::string text = cudnnGetErrorString(status);
  if (detail[0] != '\0') text += std::string(" (") + detail + ")";
  return text;
}

Status Check(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return Status::Ok();
  return Status::Error("cuDNN graph API: " + what + ": " + LastError(status));
}

Status Set(const BackendDescriptor& d, cudnnBackendAttributeName_t name,
           cudnnBackendAttributeType_t type, int64_t count, const void* value, const char* what) {
  return Check(cudnnBackendSetAttribute(d.get(), name, type, count, value),
               std::string("setting ") + what);
}

Status SetDescriptor(const BackendDescriptor& d, cudnnBackendAttributeName_t name,
                     const BackendDescriptor& value, const char* what) {
  cudnnBackendDescriptor_t v = value.get();
  return Set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v, what);
}

// The handle attributes of operation graphs and execution plans are marked
// deprecated in the newest cuDNN 9 headers (a device-properties descriptor
// is to replace them) but are what every cuDNN 9 release accepts; only these
// two settings are silenced.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
Status SetGraphHandle(const BackendDescriptor& graph, cudnnHandle_t handle) {
  return Set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
             "the operation graph's handle");
}
Status SetPlanHandle(const BackendDescriptor& plan, cudnnHandle_t handle) {
  return Set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
             "the execution plan's handle");
}
#pragma GCC diagnostic pop

Status Finalize(const BackendDescriptor& d, const char* what) {
  return Check(cudnnBackendFinalize(d.get()), std::string("finalizing ") + what);
}

// A packed NCHW float tensor.
Result<BackendDescriptor> Tensor(int64_t uid, std::array<int64_t, 4> dims, int64_t alignment) {
  PSTRAIN_ASSIGN_OR_RETURN(BackendDescriptor t,
                           BackendDescriptor::Create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "a tensor"));
  const std::array<int64_t, 4> strides = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3],
                                          1};
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  PSTRAIN_RETURN_IF_ERROR(
      Set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "a tensor's data type"));
  PSTRAIN_RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(),
                              "a tensor's dimensions"));
  PSTRAIN_RETURN_IF_ERROR(
      Set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), "a tensor's strides"));
  PSTRAIN_RETURN_IF_ERROR(
      Set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "a tensor's id"));
  PSTRAIN_RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment,
                              "a tensor's alignment"));
  PSTRAIN_RETURN_IF_ERROR(Finalize(t, "a tensor"));
  return Result<BackendDescriptor>(std::move(t));
}

Result<BackendDescriptor> Convolution(const GraphConvShape& s) {
  PSTRAIN_ASSIGN_OR_RETURN(
      BackendDescriptor conv,
      BackendDescriptor::Create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "the convolution"));
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;  // Caffe's convolution
  const int64_t spatial = 2;
  const int64_t dilations[2] = {s.dilation_h, s.dilation_w};
  const int64_t strides[2] = {s.stride_h, s.stride_w};
  const int64_t pads[2] = {s.pad_h, s.pad_w};
  PSTRAIN_RETURN_IF_ERROR(Set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
                              &compute, "the compute type"));
  PSTRAIN_RETURN_IF_ERROR(Set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE,
                              1, &mode, "the convolution mode"));
  PSTRAIN_RETURN_IF_ERROR(Set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1,
                              &spatial, "the spatial dimensions"));
  PSTRAIN_RETURN_IF_ERROR(
      Set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilations, "the dilations"));
  PSTRAIN_RETURN_IF_ERROR(Set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2,
                              strides, "the strides"));
  PSTRAIN_RETURN_IF_ERROR(
      Set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads, "the paddings"));
  PSTRAIN_RETURN_IF_ERROR(
      Set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads, "the paddings"));
  PSTRAIN_RETURN_IF_ERROR(Finalize(conv, "the convolution"));
  return Result<BackendDescriptor>(std::move(conv));
}

// The attribute names of one direction's operation.
struct OperationAttributes {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t in_a, in_b, out, conv, alpha, beta;
  int64_t uid_a, uid_b, uid_out;
  float beta_value;
};

OperationAttributes AttributesOf(GraphConvDirection direction) {
  switch (direction) {
    case GraphConvDirection::kForward:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
              kUidX,
              kUidW,
              kUidY,
              0.f};
    case GraphConvDirection::kBackwardData:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
              kUidW,
              kUidY,
              kUidX,
              0.f};
    case GraphConvDirection::kBackwardFilter:
      break;
  }
  return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
          kUidX,
          kUidY,
          kUidW,
          1.f};
}

// The convolution operation of `direction` with its tensors and convolution
// descriptor, all finalized (no device needed), appended to `parts` with the
// operation last.
Status Operation(const GraphConvShape& s, GraphConvDirection direction, int64_t alignment,
                 std::vector<BackendDescriptor>* parts) {
  const OperationAttributes attrs = AttributesOf(direction);
  PSTRAIN_ASSIGN_OR_RETURN(BackendDescriptor x, Tensor(kUidX, {s.n, s.c, s.h, s.w}, alignment));
  PSTRAIN_ASSIGN_OR_RETURN(BackendDescriptor w,
                           Tensor(kUidW, {s.k, s.c / s.group, s.kernel_h, s.kernel_w}, alignment));
  PSTRAIN_ASSIGN_OR_RETURN(BackendDescriptor y,
                           Tensor(kUidY, {s.n, s.k, s.out_h, s.out_w}, alignment));
  PSTRAIN_ASSIGN_OR_RETURN(BackendDescriptor conv, Convolution(s));
  auto tensor_of = [&](int64_t uid) -> const BackendDescriptor& {
    return uid == kUidX ? x : uid == kUidW ? w : y;
  };
  PSTRAIN_ASSIGN_OR_RETURN(BackendDescriptor op,
                           BackendDescriptor::Create(attrs.type, "the convolution operation"));
  PSTRAIN_RETURN_IF_ERROR(
      SetDescriptor(op, attrs.in_a, tensor_of(attrs.uid_a), "the operation's first input"));
  PSTRAIN_RETURN_IF_ERROR(
      SetDescriptor(op, attrs.in_b, tensor_of(attrs.uid_b), "the operation's second input"));
  PSTRAIN_RETURN_IF_ERROR(
      SetDescriptor(op, attrs.out, tensor_of(attrs.uid_out), "the operation's output"));
  PSTRAIN_RETURN_IF_ERROR(SetDescriptor(op, attrs.conv, conv, "the operation's convolution"));
  const float alpha = 1.f;
  PSTRAIN_RETURN_IF_ERROR(Set(op, attrs.alpha, CUDNN_TYPE_FLOAT, 1, &alpha, "alpha"));
  PSTRAIN_RETURN_IF_ERROR(Set(op, attrs.beta, CUDNN_TYPE_FLOAT, 1, &attrs.beta_value, "beta"));
  PSTRAIN_RETURN_IF_ERROR(Finalize(op, "the convolution operation"));
  parts->push_back(std::move(x));
  parts->push_back(std::move(w));
  parts->push_back(std::move(y));
  parts->push_back(std::move(conv));
  parts->push_back(std::move(op));
  return Status::Ok();
}

// Whether the engine behind `config` computes as the legacy path's accepted
// algorithms do: plain FP32 (no tensor cores, no down-converted inputs or
// reduced-precision reductions), precompiled, and deterministic unless
// allowed otherwise. False also when its notes cannot be read.
bool Acceptable(cudnnBackendDescriptor_t config, bool deterministic) {
  auto engine = BackendDescriptor::Create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "an engine");
  if (!engine.ok()) return false;
  cudnnBackendDescriptor_t e = engine.value().get();
  int64_t count = 0;
  if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               1, &count, &e) != CUDNN_STATUS_SUCCESS) {
    return false;
  }
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  count = 0;
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count,
                               notes) != CUDNN_STATUS_SUCCESS) {
    return false;
  }
  for (int64_t i = 0; i < count; ++i) {
    switch (notes[i]) {
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
        return false;
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
        if (deterministic) return false;
        break;
      default:
        break;
    }
  }
  cudnnBackendBehaviorNote_t behaviour[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  count = 0;
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &count,
                               behaviour) != CUDNN_STATUS_SUCCESS) {
    return false;
  }
  for (int64_t i = 0; i < count; ++i) {
    if (behaviour[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return false;
  }
  return true;
}

// The engine configurations the heuristics of `mode` offer for `graph`.
Result<std::vector<BackendDescriptor>> EngineConfigs(const BackendDescriptor& graph,
                                                     cudnnBackendHeurMode_t mode) {
  PSTRAIN_ASSIGN_OR_RETURN(
      BackendDescriptor heur,
      BackendDescriptor::Create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "the engine heuristics"));
  PSTRAIN_RETURN_IF_ERROR(SetDescriptor(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph,
                                        "the heuristics' operation graph"));
  PSTRAIN_RETURN_IF_ERROR(Set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode,
                              "the heuristics' mode"));
  PSTRAIN_RETURN_IF_ERROR(Finalize(heur, "the engine heuristics"));
  int64_t count = 0;
  PSTRAIN_RETURN_IF_ERROR(
      Check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
            "counting the heuristics' results"));
  std::vector<BackendDescriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(
        BackendDescriptor c,
        BackendDescriptor::Create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "an engine configuration"));
    raw.push_back(c.get());
    configs.push_back(std::move(c));
  }
  if (count == 0) return Result<std::vector<BackendDescriptor>>(std::move(configs));
  int64_t returned = 0;
  PSTRAIN_RETURN_IF_ERROR(
      Check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw.data()),
            "reading the heuristics' results"));
  configs.resize(static_cast<size_t>(std::min(returned, count)));
  return Result<std::vector<BackendDescriptor>>(std::move(configs));
}

// Two CUDA events, destroyed with the object.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    if (cudaEventCreate(&start) != cudaSuccess) start = nullptr;
    if (cudaEventCreate(&stop) != cudaSuccess) stop = nullptr;
  }
  ~EventPair() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

// Times one plan: a first run (which also proves it runs), then the best of
// two timed runs, in milliseconds.
Result<float> TimePlan(cudnnHandle_t handle, const GraphConvPlans& plans, int plan, const float* a,
                       const float* b, float* out, void* workspace) {
  cudaStream_t stream = nullptr;
  PSTRAIN_RETURN_IF_ERROR(Check(cudnnGetStream(handle, &stream), "reading the handle's stream"));
  EventPair events;
  if (events.start == nullptr || events.stop == nullptr) {
    return Status::Error("cuDNN graph API: cannot create CUDA events to time plans");
  }
  PSTRAIN_ASSIGN_OR_RETURN(BackendDescriptor pack, plans.Pack(a, b, out, workspace));
  PSTRAIN_RETURN_IF_ERROR(plans.Run(handle, plan, pack));
  float best = -1.f;
  for (int r = 0; r < 2; ++r) {
    cudaEventRecord(events.start, stream);
    PSTRAIN_RETURN_IF_ERROR(plans.Run(handle, plan, pack));
    cudaEventRecord(events.stop, stream);
    float ms = 0.f;
    if (cudaEventSynchronize(events.stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, events.start, events.stop) != cudaSuccess) {
      return Status::Error(std::string("cuDNN graph API: timing a plan failed: ") +
                           cudaGetErrorString(cudaGetLastError()));
    }
    if (best < 0.f || ms < best) best = ms;
  }
  return best;
}

}  // namespace

BackendDescriptor::~BackendDescriptor() {
  if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
}

BackendDescriptor& BackendDescriptor::operator=(BackendDescriptor&& other) noexcept {
  if (this != &other) {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
    d_ = other.d_;
    other.d_ = nullptr;
  }
  return *this;
}

Result<BackendDescriptor> BackendDescriptor::Create(cudnnBackendDescriptorType_t type,
                                                    const char* what) {
  BackendDescriptor d;
  PSTRAIN_RETURN_IF_ERROR(
      Check(cudnnBackendCreateDescriptor(type, &d.d_), std::string("creating ") + what));
  return Result<BackendDescriptor>(std::move(d));
}

GraphConvPlans::~GraphConvPlans() = default;

Status GraphConvPlans::CheckOperation(const GraphConvShape& shape, GraphConvDirection direction,
                                      int64_t alignment) {
  std::vector<BackendDescriptor> parts;
  return Operation(shape, direction, alignment, &parts);
}

Result<std::unique_ptr<GraphConvPlans>> GraphConvPlans::Build(
    cudnnHandle_t handle, const GraphConvShape& s, GraphConvDirection direction,
    const GraphConvOptions& options, const float* a, const float* b, float* out, void* workspace) {
  std::unique_ptr<GraphConvPlans> plans(new GraphConvPlans);
  plans->direction_ = direction;
  PSTRAIN_RETURN_IF_ERROR(Operation(s, direction, options.alignment, &plans->parts_));
  const BackendDescriptor& op = plans->parts_.back();

  PSTRAIN_ASSIGN_OR_RETURN(
      BackendDescriptor graph,
      BackendDescriptor::Create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "the operation graph"));
  PSTRAIN_RETURN_IF_ERROR(
      SetDescriptor(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, op, "the operation graph's operation"));
  PSTRAIN_RETURN_IF_ERROR(SetGraphHandle(graph, handle));
  PSTRAIN_RETURN_IF_ERROR(Finalize(graph, "the operation graph"));

  // Candidates: heuristics mode A's acceptable configurations, finalized and
  // timed; the fallback list's when none of A's survives (or A fails).
  std::string refusals;
  auto note = [&refusals](const Status& s) {
    if (refusals.empty()) refusals = s.message();
  };
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Result<std::vector<BackendDescriptor>> offered = EngineConfigs(graph, mode);
    if (!offered.ok()) {
      note(offered.status());
      continue;
    }
    std::vector<Plan> candidates;
    for (BackendDescriptor& c : offered.value()) {
      if (static_cast<int>(candidates.size()) == kMaxCandidates) break;
      if (!Acceptable(c.get(), options.deterministic)) continue;
      Result<Plan> plan = MakePlan(handle, std::move(c));
      if (!plan.ok()) {  // this engine cannot run the shape: the next may
        note(plan.status());
        continue;
      }
      if (plan.value().workspace > options.workspace_limit) continue;
      candidates.push_back(std::move(plan).value());
    }
    plans->plans_ = std::move(candidates);
    // Time each; a plan that fails to run is dropped.
    std::vector<Plan> timed;
    for (int i = 0; i < plans->size(); ++i) {
      Result<float> ms = TimePlan(handle, *plans, i, a, b, out, workspace);
      if (!ms.ok()) {
        note(ms.status());
        continue;
      }
      plans->plans_[i].milliseconds = ms.value();
      timed.push_back(std::move(plans->plans_[i]));
    }
    std::stable_sort(timed.begin(), timed.end(),
                     [](const Plan& l, const Plan& r) { return l.milliseconds < r.milliseconds; });
    plans->plans_ = std::move(timed);
    if (!plans->plans_.empty()) break;
  }
  if (plans->plans_.empty()) {
    return Status::Error("cuDNN graph API: no acceptable execution plan ran for this convolution" +
                         (refusals.empty() ? std::string() : " (first refusal: " + refusals + ")"));
  }
  plans->parts_.push_back(std::move(graph));
  return Result<std::unique_ptr<GraphConvPlans>>(std::move(plans));
}

Result<GraphConvPlans::Plan> GraphConvPlans::MakePlan(cudnnHandle_t handle,
                                                      BackendDescriptor config) {
  Plan p;
  p.config = std::move(config);
  PSTRAIN_ASSIGN_OR_RETURN(
      p.plan, BackendDescriptor::Create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "a plan"));
  PSTRAIN_RETURN_IF_ERROR(SetPlanHandle(p.plan, handle));
  PSTRAIN_RETURN_IF_ERROR(SetDescriptor(p.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, p.config,
                                        "the plan's engine"));
  PSTRAIN_RETURN_IF_ERROR(Finalize(p.plan, "an execution plan"));
  int64_t bytes = 0, count = 0;
  PSTRAIN_RETURN_IF_ERROR(
      Check(cudnnBackendGetAttribute(p.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &count, &bytes),
            "reading a plan's workspace size"));
  if (bytes < 0) return Status::Error("cuDNN graph API: a plan's workspace size is negative");
  p.workspace = static_cast<size_t>(bytes);
  return Result<Plan>(std::move(p));
}

Result<BackendDescriptor> GraphConvPlans::Pack(const float* a, const float* b, float* out,
                                               void* workspace) const {
  const OperationAttributes attrs = AttributesOf(direction_);
  PSTRAIN_ASSIGN_OR_RETURN(
      BackendDescriptor pack,
      BackendDescriptor::Create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "a variant pack"));
  const int64_t uids[3] = {attrs.uid_a, attrs.uid_b, attrs.uid_out};
  void* pointers[3] = {const_cast<float*>(a), const_cast<float*>(b), out};
  PSTRAIN_RETURN_IF_ERROR(
      Set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids, "the operand ids"));
  PSTRAIN_RETURN_IF_ERROR(Set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3,
                              pointers, "the operand pointers"));
  PSTRAIN_RETURN_IF_ERROR(Set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                              &workspace, "the workspace"));
  PSTRAIN_RETURN_IF_ERROR(Finalize(pack, "a variant pack"));
  return Result<BackendDescriptor>(std::move(pack));
}

Status GraphConvPlans::Run(cudnnHandle_t handle, int plan, const BackendDescriptor& pack) const {
  return Check(cudnnBackendExecute(handle, plans_[plan].plan.get(), pack.get()),
               "running a convolution plan");
}

Status GraphConvPlans::Execute(cudnnHandle_t handle, int plan, const float* a, const float* b,
                               float* out, void* workspace) const {
  PSTRAIN_ASSIGN_OR_RETURN(BackendDescriptor pack, Pack(a, b, out, workspace));
  return Run(handle, plan, pack);
}

}  // namespace pstrain

#include "worker/device_update.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/device_allocator.hpp"
#include "common/cuda/gpu_context.hpp"
#include "common/cuda/sum_squares.hpp"
#endif

namespace pstrain {

#ifndef PSTRAIN_HAVE_CUDA

struct DeviceUpdate::State {};

Result<std::unique_ptr<DeviceUpdate>> DeviceUpdate::Create(const optim::SolverHyper&,
                                                           const std::vector<LearnableParam>&,
                                                           const HostHistory&) {
  return Status::FailedPrecondition("the GPU update needs a CUDA build");
}
Status DeviceUpdate::Supports(const optim::SolverHyper&) {
  return Status::FailedPrecondition("the GPU update needs a CUDA build");
}
DeviceUpdate::DeviceUpdate(std::unique_ptr<State> state) : state_(std::move(state)) {}
DeviceUpdate::~DeviceUpdate() = default;
Result<double> DeviceUpdate::SumSquaresDiff() { return 0.0; }
void DeviceUpdate::Apply(const optim::StepInputs&) { PSTRAIN_CHECK(false); }
Status DeviceUpdate::DownloadHistory(HostHistory*) { return Status::Ok(); }

#else  // PSTRAIN_HAVE_CUDA

Status DeviceUpdate::Supports(const optim::SolverHyper& hyper) {
  return optim::CheckGpuKernel(hyper.type);
}

struct DeviceUpdate::State {
  std::unique_ptr<optim::UpdateRule> rule;  // has_gpu_kernel()
  const std::vector<LearnableParam>* params = nullptr;
  std::vector<std::vector<float*>> history;  // [param][slot], device arrays
  double* sum = nullptr;                     // one double for SumSquaresDiff
  double* host_sum = nullptr;                // pinned, its download

  ~State() {
    for (auto& slots : history) {
      for (float* h : slots) DeviceFree(h);
    }
    DeviceFree(sum);
    PinnedFree(host_sum);
  }
};

Result<std::unique_ptr<DeviceUpdate>> DeviceUpdate::Create(
    const optim::SolverHyper& hyper, const std::vector<LearnableParam>& params,
    const HostHistory& history) {
  PSTRAIN_RETURN_IF_ERROR(Supports(hyper));
  auto state = std::make_unique<State>();
  PSTRAIN_ASSIGN_OR_RETURN(state->rule, optim::MakeUpdateRule(hyper));
  state->params = &params;
  cudaStream_t stream = GpuContext::ForThisThread().stream();
  state->history.assign(params.size(), {});
  for (size_t i = 0; i < params.size(); ++i) {
    const size_t bytes = static_cast<size_t>(params[i].blob->count()) * sizeof(float);
    for (const auto& slot : history) {
      PSTRAIN_CHECK(slot[i].size() * sizeof(float) == bytes);
      PSTRAIN_ASSIGN_OR_RETURN(void* h, TryDeviceAlloc(bytes));
      state->history[i].push_back(static_cast<float*>(h));
      if (bytes > 0) {
        PSTRAIN_CUDA_CHECK(
            cudaMemcpyAsync(h, slot[i].data(), bytes, cudaMemcpyHostToDevice, stream));
      }
    }
  }
  PSTRAIN_ASSIGN_OR_RETURN(void* sum, TryDeviceAlloc(sizeof(double)));
  state->sum = static_cast<double*>(sum);
  PSTRAIN_ASSIGN_OR_RETURN(void* host_sum, TryPinnedAlloc(sizeof(double)));
  state->host_sum = static_cast<double*>(host_sum);
  // The uploads read the pageable host history: done before it may change.
  PSTRAIN_RETURN_IF_ERROR(GpuContext::ForThisThread().Finish("uploading the solver history"));
  return std::unique_ptr<DeviceUpdate>(new DeviceUpdate(std::move(state)));
}

DeviceUpdate::DeviceUpdate(std::unique_ptr<State> state) : state_(std::move(state)) {}

DeviceUpdate::~DeviceUpdate() = default;

Result<double> DeviceUpdate::SumSquaresDiff() {
  State& s = *state_;
  GpuContext& gpu = GpuContext::ForThisThread();
  cudaStream_t stream = gpu.stream();
  PSTRAIN_CUDA_CHECK(cudaMemsetAsync(s.sum, 0, sizeof(double), stream));
  for (const LearnableParam& p : *s.params) {
    optim::AddSumSquaresGpu(p.blob->gpu_diff(), static_cast<size_t>(p.blob->count()), s.sum,
                            stream);
  }
  PSTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(s.host_sum, s.sum, sizeof(double), cudaMemcpyDeviceToHost, stream));
  PSTRAIN_RETURN_IF_ERROR(gpu.Finish("summing the squared gradients for clip_gradients"));
  return *s.host_sum;
}

void DeviceUpdate::Apply(const optim::StepInputs& in) {
  State& s = *state_;
  cudaStream_t stream = GpuContext::ForThisThread().stream();
  const std::vector<LearnableParam>& params = *s.params;
  for (size_t i = 0; i < params.size(); ++i) {
    const LearnableParam& p = params[i];
    if (p.lr_mult == 0.f) continue;  // as the CPU step: these weights stay
    s.rule->ApplyOnDevice(
        in, optim::ParamHyper{p.lr_mult, p.decay_mult},
        optim::DeviceSlice{p.blob->mutable_gpu_data(), p.blob->mutable_gpu_diff(),
                           s.history[i].data(), static_cast<size_t>(p.blob->count())},
        stream);
  }
}

Status DeviceUpdate::DownloadHistory(HostHistory* history) {
  State& s = *state_;
  GpuContext& gpu = GpuContext::ForThisThread();
  cudaStream_t stream = gpu.stream();
  for (size_t slot = 0; slot < history->size(); ++slot) {
    for (size_t i = 0; i < s.history.size(); ++i) {
      std::vector<float>& host = (*history)[slot][i];
      if (host.empty()) continue;
      PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(host.data(), s.history[i][slot],
                                         host.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                         stream));
    }
  }
  return gpu.Finish("downloading the solver history");
}

#endif  // PSTRAIN_HAVE_CUDA

}  // namespace pstrain

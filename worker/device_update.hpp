// DeviceUpdate: the trainer's solver step on the GPU (CUDA builds only).
//
// When the train net runs on the GPU engine, the update rule runs where the
// weights and gradients already are: one kernel per parameter (the rule's GPU
// kernel, UpdateRule::ApplyOnDevice: the same floats as the CPU rule) on the
// thread's compute stream, with the rule's history arrays kept in device
// memory. Only
// a snapshot downloads the history (DownloadHistory) and, through the blobs'
// lazy sync, the weights; nothing is copied per step unless gradients are
// clipped, which reads back one double (the global sum of squares).
//
// Not thread-safe: the trainer's thread owns it, on its GpuContext.
#pragma once

#include <memory>
#include <vector>

#include "common/optim/solver_hyper.hpp"
#include "common/optim/update_rule.hpp"
#include "common/status.hpp"
#include "worker/net.hpp"

namespace pstrain {

// [slot][param][element], as the trainer keeps the history on the host.
using HostHistory = std::vector<std::vector<std::vector<float>>>;

class DeviceUpdate {
 public:
  // Device history for `params` (which must outlive this), uploaded from
  // `history` (zeros, or what a .solverstate restored). Out of device memory
  // is ResourceExhausted; a build without CUDA or a rule without a GPU kernel
  // fails (Supports).
  // REQUIRES: history has history_slots() slots of params.size() arrays of
  // each param's count().
  // Ok when the device can run `hyper`'s rule: a CUDA build and a rule with a
  // GPU kernel (optim::CheckGpuKernel's message otherwise). The trainer asks
  // at Init, so a job is refused before its first step.
  static Status Supports(const optim::SolverHyper& hyper);
  static Result<std::unique_ptr<DeviceUpdate>> Create(const optim::SolverHyper& hyper,
                                                      const std::vector<LearnableParam>& params,
                                                      const HostHistory& history);
  ~DeviceUpdate();
  DeviceUpdate(const DeviceUpdate&) = delete;
  DeviceUpdate& operator=(const DeviceUpdate&) = delete;

  // The sum of squares of every parameter's diff (for ClipScale); waits for
  // the stream and reports a failure of the work queued on it.
  Result<double> SumSquaresDiff();
  // Queues the step of every parameter with lr_mult != 0 on the compute
  // stream (the weights and diffs move to the device if they are not there).
  void Apply(const optim::StepInputs& in);
  // Copies the device history into `history` (same layout as Create's); waits
  // and reports a failure of the work queued on the stream.
  Status DownloadHistory(HostHistory* history);

 private:
  struct State;
  explicit DeviceUpdate(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace pstrain

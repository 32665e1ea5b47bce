// PsWorker: the choice of GPU IPC pushes (common/transport/gpu_path.hpp,
// worker/ps/gpu_region.hpp). The pushes themselves are in AfterBackward.
#include "worker/ps/ps_worker.hpp"

namespace pstrain {

void PsWorker::Notice(char level, const std::string& text) const {
  if (options_.on_notice) options_.on_notice(level, text);
}

Status PsWorker::OfferGpuIpc(PsClientOptions* client) {
  transport::WorkerGpuFacts facts;
  facts.gpu_ipc = client->gpu_ipc;
  facts.gpu_engine = trainer_->engine() == Engine::kGpu;
  facts.host_group = group_ != nullptr;
  facts.mode = client->mode;
  facts.compression = client->compression;
  facts.elastic = options_.elastic.method != ElasticOptions::Method::kNone;
#ifdef PSTRAIN_HAVE_CUDA
  facts.cuda_build = true;
#endif
  std::string why = transport::WorkerGpuIpcBlocker(facts);
  if (why.empty()) {
    auto region = GpuGradientRegion::Create(ps_blobs_);
    if (region.ok()) {
      gpu_region_ = std::move(region.value());
      client->gpu_ipc_offer = gpu_region_->offer();
      return Status::Ok();
    }
    why = region.status().message();
  }
  if (client->gpu_ipc == transport::GpuIpcSwitch::kOn) {
    return Status::FailedPrecondition("transport.gpu_ipc is true but " + why);
  }
  // A CPU worker has nothing to say about a GPU path.
  if (facts.gpu_engine) Notice('I', "GPU IPC pushes off, gradients go through the socket: " + why);
  return Status::Ok();
}

void PsWorker::UseGpuPath() {
  if (!gpu_region_) return;
  const transport::GpuPathDecision& path = client_->gpu_path();
  if (path.ipc) {
    Notice('I', "GPU IPC pushes on: gradients stay in device memory (" + path.reason + ")");
    if (factors_) {
      // Every gradient goes through the region: the capture's reads from the
      // device would be for nothing. No forward has run yet.
      Notice('I', "sufficient factors: off, GPU IPC pushes hand every gradient over in "
                  "device memory");
      hooks_.after_backward = nullptr;
      trainer_->net().set_layer_hooks(hooks_);
      factors_.reset();  // the layers compute their weight gradients again
    }
    return;
  }
  Notice('W', "GPU IPC pushes off, gradients go through the socket: " + path.reason);
  gpu_region_.reset();
}

}  // namespace pstrain

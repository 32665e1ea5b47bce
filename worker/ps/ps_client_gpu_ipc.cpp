// PsClient: GPU IPC pushes (common/transport/gpu_path.hpp): the choice of
// the path in Hello and PushIpc.
#include "worker/ps/ps_client.hpp"

namespace pstrain {

using transport::OutMessage;

Status PsClient::ChooseGpuPath(const std::vector<transport::InMessage>& acks) {
  if (!options_.gpu_ipc_offer) {
    gpu_path_ = {false, "no GPU IPC offer (not a GPU worker, or transport.gpu_ipc is false)"};
    return Status::Ok();
  }
  std::vector<std::optional<pstrain::GpuIpcAnswer>> answers;
  for (const transport::InMessage& ack : acks) {
    answers.push_back(ack.header.has_gpu_ipc_answer()
                          ? std::optional<pstrain::GpuIpcAnswer>(ack.header.gpu_ipc_answer())
                          : std::nullopt);
  }
  PSTRAIN_ASSIGN_OR_RETURN(gpu_path_,
                           transport::DecideGpuPath(options_.gpu_ipc, answers, shard_has_chunks_));
  return Status::Ok();
}

Status PsClient::PushIpc(const std::vector<int>& param_ids, int64_t clock,
                         const std::vector<uint64_t>& offsets) {
  PSTRAIN_RETURN_IF_ERROR(NeedsWorker("PUSH"));
  if (!gpu_path_.ipc) {
    return Status::FailedPrecondition("PushIpc, but pushes go through the socket: " +
                                      gpu_path_.reason);
  }
  std::vector<pstrain::Header> headers(channels_.size());
  for (int p : param_ids) {
    const uint64_t base = offsets[static_cast<size_t>(p)];
    for (uint32_t id : placement_.param_chunks(p)) {
      const Chunk& c = placement_.chunk(id);
      pstrain::Header& h = headers[static_cast<size_t>(c.shard)];
      transport::AddChunk(h, id, static_cast<uint64_t>(c.length));
      h.add_ipc_offsets(base + static_cast<uint64_t>(c.offset) * sizeof(float));
    }
  }
  for (size_t k = 0; k < headers.size(); ++k) {
    if (headers[k].chunks_size() == 0) continue;
    pstrain::Header header = transport::PushHeader(origin(), clock, -1.0);
    *header.mutable_chunks() = std::move(*headers[k].mutable_chunks());
    *header.mutable_ipc_offsets() = std::move(*headers[k].mutable_ipc_offsets());
    std::vector<uint32_t> ids;
    for (const auto& ref : header.chunks()) ids.push_back(ref.id());
    // One message: no payload travels, so nothing to cut into parts.
    PSTRAIN_RETURN_IF_ERROR(SendPushPart(static_cast<int>(k), OutMessage{std::move(header), {}}));
    NotePushed(k, clock, ids);
    ++traffic_.gpu_ipc_pushes;
  }
  return Status::Ok();
}

}  // namespace pstrain

// ShardLoop: the GPU IPC part of receiving (server/gpu_ipc_reader.hpp).
#include "server/shard_loop.hpp"

namespace pstrain::server {

void ShardLoop::AnswerGpuIpc(const pstrain::Header& hello, std::vector<Outgoing>& out) {
  const std::optional<GpuIpcAnswer> answer = gpu_ipc_->OnHello(hello);
  if (!answer) return;
  const std::string worker = "worker " + std::to_string(hello.sender());
  Log(answer->accepted()
          ? worker + " pushes through GPU IPC (" +
                std::to_string(hello.gpu_ipc_offer().region_bytes()) + "-byte region on " +
                hello.gpu_ipc_offer().device() + "; " + answer->reason() + ")"
          : worker + "'s GPU IPC offer refused: " + answer->reason());
  for (Outgoing& o : out) {
    if (o.header.type() == pstrain::HELLO_ACK) *o.header.mutable_gpu_ipc_answer() = *answer;
  }
}

bool ShardLoop::ReadIpcPush(const transport::InMessage& message, Incoming& incoming,
                            TimePoint now) {
  const Status s = gpu_ipc_->Read(message.header, &incoming.payloads);
  if (s.ok()) return true;
  shard_.CountBadMessage();
  const std::string why =
      "IPC push of worker " + std::to_string(message.header.sender()) + " refused: " + s.message();
  drops_.Report("dropped " + transport::Describe(message) + ": " + why, now);
  const transport::Origin self{pstrain::SERVER, shard_.config().shard, shard_.config().job_key};
  Outgoing error;
  error.peer = message.peer;
  error.header = transport::ErrorHeader(self, message.header, why);
  std::vector<Outgoing> out;
  out.push_back(std::move(error));
  SendAll(std::move(out));
  return false;
}

}  // namespace pstrain::server

// ShardLoop: R pushed once (ps-worker --factor-right holder): a factor push
// that came without R, or a forwarded FACTOR_RIGHT, goes through
// ReceiveForwarding (server/factor_forward.hpp), which the message fuzzer
// shares.
#include "server/shard_loop.hpp"

namespace pstrain::server {

void ShardLoop::ReceiveForwarding(transport::InMessage message, TimePoint now) {
  const std::string described = transport::Describe(message);
  std::string dropped;
  std::vector<Outgoing> out =
      server::ReceiveForwarding(std::move(message), shard_, rights_, factors_, now, &dropped);
  if (!dropped.empty()) drops_.Report("dropped " + described + ": " + dropped, now);
  SendAll(std::move(out));
}

}  // namespace pstrain::server

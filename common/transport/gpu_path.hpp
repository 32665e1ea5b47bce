// GPU IPC pushes (docs/wire-protocol.md, "GPU IPC pushes"): the decisions
// and checks that need no GPU. A GPU worker on the same host as a GPU shard
// hands its gradients over in device memory: it offers a CUDA IPC region and
// event in HELLO, the shard answers in HELLO_ACK, and each PUSH then carries
// byte offsets into that region instead of payload frames. The CUDA halves
// are worker/ps/gpu_region.hpp and server/gpu_ipc_reader.hpp; everything
// here is plain data, so CPU tests cover every decision and refusal.
//
// Who decides: the worker offers only where it could use the path at all
// (WorkerGpuIpcBlocker), each shard accepts or refuses with a reason
// (ShardGpuIpcBlocker, then opening the handles), and the worker takes the
// path only when every shard holding its chunks accepted (DecideGpuPath).
// Otherwise every push goes through the socket, as before, and the reason is
// logged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/ps/consistency_mode.hpp"
#include "common/status.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain::transport {

// transport.gpu_ipc (ps-worker --gpu-ipc): auto (take the path where every
// shard accepts, else sockets), true (a shard that refuses fails the worker's
// HELLO), false (never offer).
enum class GpuIpcSwitch { kAuto, kOn, kOff };
// "auto", "true", "false"; otherwise "--gpu-ipc 'x' is not auto, true or false".
Result<GpuIpcSwitch> ParseGpuIpcSwitch(const std::string& text);
const char* GpuIpcSwitchName(GpuIpcSwitch value);

// "<boot id>@<host name>": two processes share a host (and so can share CUDA
// IPC handles) when their ids are equal. The boot id tells apart two
// machines, containers or boots that share a host name.
std::string HostId(const std::string& boot_id, const std::string& host_name);
// This process's: /proc/sys/kernel/random/boot_id (trimmed; "no-boot-id"
// when unreadable) and gethostname.
std::string LocalHostId();

// What keeps a worker from offering GPU IPC, or "" when it may offer.
struct WorkerGpuFacts {
  GpuIpcSwitch gpu_ipc = GpuIpcSwitch::kAuto;
  bool gpu_engine = false;  // the net runs on the GPU engine
  bool host_group = false;  // bsp host aggregation (sums go through host memory)
  ConsistencyMode mode = ConsistencyMode::kBsp;
  DataType compression = FLOAT32;
  bool elastic = false;  // EASGD / model averaging pushes weight deltas
  bool cuda_build = false;
};
// Reasons, in this order: "transport.gpu_ipc is false", "this build has no
// CUDA", "the worker runs on the CPU engine", "bsp host aggregation sums on the
// host", "ssp: GPU IPC pushes need bsp (the pull barrier orders the reuse of
// the worker's region)", "FLOAT16 push compression encodes on the host",
// "an elastic method pushes weight deltas".
std::string WorkerGpuIpcBlocker(const WorkerGpuFacts& facts);

// What a shard knows when a HELLO offers GPU IPC.
struct ShardGpuFacts {
  int shard = 0;
  std::string host_id;  // LocalHostId()
  int device = -1;      // ShardConfig::device; -1: chunks on the CPU
  ConsistencyMode mode = ConsistencyMode::kBsp;
  int backup_workers = 0;
  bool cuda_build = false;
};
// "" when the shard may open the offer's handles; otherwise why not, in this
// order: "shard 0's build has no CUDA", "shard 0 keeps its chunks on the CPU
// (--device cpu)", "the worker is on host A, shard 0 on host B", "shard 0
// runs ssp: GPU IPC pushes need bsp (...)", "shard 0 runs bsp with 1 backup
// worker: a late push could be read after the worker reused its region", and
// an offer without a region: "the offer's region is empty".
std::string ShardGpuIpcBlocker(const GpuIpcOffer& offer, const ShardGpuFacts& facts);

// The worker's choice after HELLO. answers[k]: shard k's HELLO_ACK answer
// (nullopt: none, a shard from before GPU IPC); holds_chunks[k]: shard k
// holds chunks of this worker's params (a shard without any is not asked).
struct GpuPathDecision {
  bool ipc = false;
  std::string reason;  // why sockets, or "every shard with chunks accepted"
};
// With kOn a refusal is an error: FailedPrecondition "transport.gpu_ipc is
// true but server 1 refused GPU IPC pushes: <reason>"; with kAuto the same
// words are the decision's reason ("server 1 refused GPU IPC pushes: ...",
// "server 0 does not know GPU IPC pushes (an older ps-server)").
// REQUIRES: answers.size() == holds_chunks.size().
Result<GpuPathDecision> DecideGpuPath(GpuIpcSwitch gpu_ipc,
                                      const std::vector<std::optional<GpuIpcAnswer>>& answers,
                                      const std::vector<bool>& holds_chunks);

// The shape of an IPC PUSH (Validate calls it for a header with
// ipc_offsets): Ok, or "ipc_offsets in a PULL_REPLY (only a PUSH carries
// them)", "IPC push with 2 payload frames (its values are in the worker's
// region)", "IPC push with factors", "IPC push of FLOAT16 (its slices are
// float32)", "IPC push lists 3 chunks and 2 ipc_offsets".
Status CheckIpcPushShape(const Header& header, size_t payload_frames);

// Each slice of an IPC PUSH (shape checked) against the region of
// `region_bytes` its worker offered: Ok, or "chunk 7 at byte offset 6 is
// not 4-byte aligned", "chunk 7's slice [4096, 8192) ends past the
// worker's 6000-byte region". Overflow-safe.
Status CheckIpcSlices(const Header& header, uint64_t region_bytes);

}  // namespace pstrain::transport

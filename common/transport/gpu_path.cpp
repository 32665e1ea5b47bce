#include "common/transport/gpu_path.hpp"

#include <unistd.h>

#include <fstream>

namespace pstrain::transport {

using std::to_string;

Result<GpuIpcSwitch> ParseGpuIpcSwitch(const std::string& text) {
  if (text == "auto") return GpuIpcSwitch::kAuto;
  if (text == "true") return GpuIpcSwitch::kOn;
  if (text == "false") return GpuIpcSwitch::kOff;
  return Status::InvalidArgument("--gpu-ipc '" + text + "' is not auto, true or false");
}

const char* GpuIpcSwitchName(GpuIpcSwitch value) {
  switch (value) {
    case GpuIpcSwitch::kAuto:
      return "auto";
    case GpuIpcSwitch::kOn:
      return "true";
    case GpuIpcSwitch::kOff:
      return "false";
  }
  return "?";
}

std::string HostId(const std::string& boot_id, const std::string& host_name) {
  return boot_id + "@" + host_name;
}

std::string LocalHostId() {
  std::string boot_id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  if (!(in && std::getline(in, boot_id)) || boot_id.empty()) boot_id = "no-boot-id";
  while (!boot_id.empty() && (boot_id.back() == '\n' || boot_id.back() == ' ')) boot_id.pop_back();
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
  return HostId(boot_id, name);
}

namespace {

std::string NeedsBsp(const std::string& who, ConsistencyMode mode) {
  return who + " " + ModeName(mode) +
         ": GPU IPC pushes need bsp (the pull barrier orders the reuse of the worker's region)";
}

}  // namespace

std::string WorkerGpuIpcBlocker(const WorkerGpuFacts& f) {
  if (f.gpu_ipc == GpuIpcSwitch::kOff) return "transport.gpu_ipc is false";
  if (!f.cuda_build) return "this build has no CUDA";
  if (!f.gpu_engine) return "the worker runs on the CPU engine";
  if (f.host_group) return "bsp host aggregation sums on the host";
  if (f.mode != ConsistencyMode::kBsp) return NeedsBsp("the worker runs", f.mode);
  if (f.compression != FLOAT32) {
    return DataType_Name(f.compression) + " push compression encodes on the host";
  }
  if (f.elastic) return "an elastic method pushes weight deltas";
  return "";
}

std::string ShardGpuIpcBlocker(const GpuIpcOffer& offer, const ShardGpuFacts& f) {
  const std::string shard = "shard " + to_string(f.shard);
  if (!f.cuda_build) return shard + "'s build has no CUDA";
  if (f.device < 0) return shard + " keeps its chunks on the CPU (--device cpu)";
  if (offer.host_id() != f.host_id) {
    return "the worker is on host " + offer.host_id() + ", " + shard + " on host " + f.host_id;
  }
  if (f.mode != ConsistencyMode::kBsp) return NeedsBsp(shard + " runs", f.mode);
  if (f.backup_workers > 0) {
    return shard + " runs bsp with " + to_string(f.backup_workers) + " backup worker" +
           (f.backup_workers == 1 ? "" : "s") +
           ": a late push could be read after the worker reused its region";
  }
  if (offer.region_bytes() == 0) return "the offer's region is empty";
  return "";
}

Result<GpuPathDecision> DecideGpuPath(GpuIpcSwitch gpu_ipc,
                                      const std::vector<std::optional<GpuIpcAnswer>>& answers,
                                      const std::vector<bool>& holds_chunks) {
  PSTRAIN_CHECK(answers.size() == holds_chunks.size());
  if (gpu_ipc == GpuIpcSwitch::kOff) return GpuPathDecision{false, "transport.gpu_ipc is false"};
  for (size_t k = 0; k < answers.size(); ++k) {
    if (!holds_chunks[k]) continue;
    std::string why;
    if (!answers[k].has_value()) {
      why = "server " + to_string(k) + " does not know GPU IPC pushes (an older ps-server)";
    } else if (!answers[k]->accepted()) {
      why = "server " + to_string(k) + " refused GPU IPC pushes: " + answers[k]->reason();
    } else {
      continue;
    }
    if (gpu_ipc == GpuIpcSwitch::kOn) {
      return Status::FailedPrecondition("transport.gpu_ipc is true but " + why);
    }
    return GpuPathDecision{false, why};
  }
  return GpuPathDecision{true, "every shard with chunks accepted"};
}

Status CheckIpcPushShape(const Header& h, size_t payload_frames) {
  if (h.type() != PUSH) {
    return Status::InvalidArgument("ipc_offsets in a " + MessageType_Name(h.type()) +
                                   " (only a PUSH carries them)");
  }
  if (payload_frames != 0) {
    return Status::InvalidArgument("IPC push with " + to_string(payload_frames) +
                                   " payload frames (its values are in the worker's region)");
  }
  if (h.has_factors()) return Status::InvalidArgument("IPC push with factors");
  if (h.dtype() != FLOAT32) {
    return Status::InvalidArgument("IPC push of " + DataType_Name(h.dtype()) +
                                   " (its slices are float32)");
  }
  if (h.ipc_offsets_size() != h.chunks_size()) {
    return Status::InvalidArgument("IPC push lists " + to_string(h.chunks_size()) + " chunks and " +
                                   to_string(h.ipc_offsets_size()) + " ipc_offsets");
  }
  return Status::Ok();
}

Status CheckIpcSlices(const Header& h, uint64_t region_bytes) {
  for (int i = 0; i < h.chunks_size(); ++i) {
    const uint32_t id = h.chunks(i).id();
    const uint64_t offset = h.ipc_offsets(i);
    const uint64_t length = h.chunks(i).length();
    if (offset % sizeof(float) != 0) {
      return Status::InvalidArgument("chunk " + to_string(id) + " at byte offset " +
                                     to_string(offset) + " is not 4-byte aligned");
    }
    const bool fits = length <= region_bytes / sizeof(float) && offset <= region_bytes &&
                      length * sizeof(float) <= region_bytes - offset;
    if (!fits) {
      const std::string end = length <= UINT64_MAX / sizeof(float) - offset / sizeof(float)
                                  ? to_string(offset + length * sizeof(float))
                                  : "past 2^64";
      return Status::InvalidArgument("chunk " + to_string(id) + "'s slice [" + to_string(offset) +
                                     ", " + end + ") ends past the worker's " +
                                     to_string(region_bytes) + "-byte region");
    }
  }
  return Status::Ok();
}

}  // namespace pstrain::transport

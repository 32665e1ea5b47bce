#include "server/shard_checkpoint.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "common/proto_io.hpp"

namespace pstrain::server {
namespace {

static_assert(std::endian::native == std::endian::little,
              "shard state files store floats as raw little-endian bytes");

std::string ToBytes(std::span<const float> values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// `bytes` as `n` floats, or an error naming `what`.
Result<std::vector<float>> FromBytes(const std::string& bytes, int64_t n, const std::string& what) {
  if (bytes.size() != static_cast<size_t>(n) * sizeof(float)) {
    return Status::Error(what + " has " + std::to_string(bytes.size()) + " bytes, expected " +
                         std::to_string(n * static_cast<int64_t>(sizeof(float))));
  }
  std::vector<float> values(static_cast<size_t>(n));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

std::string Shards(int shard, int num_shards) {
  return "shard " + std::to_string(shard) + " of " + std::to_string(num_shards);
}

// Everything but the chunk contents.
Status CheckHeader(const pstrain::ShardState& s, const ShardConfig& config) {
  if (s.shard() != config.shard || s.num_shards() != config.num_shards) {
    return Status::Error("the state is for " + Shards(s.shard(), s.num_shards()) +
                         ", this server is " + Shards(config.shard, config.num_shards));
  }
  if (s.chunk_bytes() != static_cast<uint64_t>(config.chunk_bytes)) {
    return Status::Error("the state was written with chunk_bytes " +
                         std::to_string(s.chunk_bytes()) + ", this server uses " +
                         std::to_string(config.chunk_bytes));
  }
  if (s.worker_clocks_size() != config.num_workers) {
    return Status::Error("the state has clocks of " + std::to_string(s.worker_clocks_size()) +
                         " workers, this job has " + std::to_string(config.num_workers));
  }
  if (s.has_solver_type() && s.solver_type() != config.hyper.type) {
    return Status::Error("the state holds " + s.solver_type() + " history, this job's solver is " +
                         config.hyper.type);
  }
  if (s.version() < 0 || s.pushes_applied() < 0) {
    return Status::Error("negative version or push count");
  }
  for (int64_t clock : s.worker_clocks()) {
    if (clock < 0) return Status::Error("a negative worker clock");
  }
  return Status::Ok();
}

Status LoadChunks(const pstrain::ShardState& s, ChunkStore& store) {
  const std::vector<uint32_t>& ids = store.chunk_ids();
  if (!std::equal(ids.begin(), ids.end(), s.chunk_ids().begin(), s.chunk_ids().end())) {
    return Status::Error("the state's chunk table differs from the one its parameter list gives " +
                         std::to_string(ids.size()) + " chunks on this shard (another net?)");
  }
  const int slots = store.history_slots();
  if (s.history_slots() != slots || s.weights_size() != static_cast<int>(ids.size()) ||
      s.history_size() != static_cast<int>(ids.size()) * slots) {
    return Status::Error("the state has " + std::to_string(s.weights_size()) + " weight and " +
                         std::to_string(s.history_size()) + " history entries; expected " +
                         std::to_string(ids.size()) + " and " +
                         std::to_string(ids.size() * static_cast<size_t>(slots)));
  }
  for (size_t c = 0; c < ids.size(); ++c) {
    const uint32_t id = ids[c];
    const std::string name = "chunk " + std::to_string(id);
    PSTRAIN_ASSIGN_OR_RETURN(
        auto w, FromBytes(s.weights(static_cast<int>(c)), store.length(id), name + " weights"));
    store.SetWeights(id, w);
    for (int k = 0; k < slots; ++k) {
      PSTRAIN_ASSIGN_OR_RETURN(
          auto h, FromBytes(s.history(static_cast<int>(c) * slots + k), store.length(id),
                            name + " history " + std::to_string(k)));
      store.SetHistory(id, k, h);
    }
  }
  return Status::Ok();
}

}  // namespace

Status WriteShardState(const std::string& path, const ShardConfig& config,
                       const ShardLayout& layout, const ShardProgress& progress) {
  const ChunkStore& store = *layout.store;
  pstrain::ShardState s;
  s.set_shard(config.shard);
  s.set_num_shards(config.num_shards);
  s.set_chunk_bytes(static_cast<uint64_t>(config.chunk_bytes));
  s.set_solver_type(config.hyper.type);
  s.set_version(progress.version);
  s.set_pushes_applied(progress.pushes_applied);
  for (int64_t clock : progress.worker_clocks) s.add_worker_clocks(clock);
  s.set_staleness_max(progress.staleness_max);
  for (int64_t n : progress.staleness_histogram) s.add_staleness_histogram(n);
  for (const pstrain::ParamMeta& p : layout.params) *s.add_params() = p;
  s.set_history_slots(store.history_slots());
  for (uint32_t id : store.chunk_ids()) {
    s.add_chunk_ids(id);
    s.add_weights(ToBytes(store.weights(id)));
    for (int k = 0; k < store.history_slots(); ++k) s.add_history(ToBytes(store.history(id, k)));
  }
  return WriteBinaryProto(s, path);
}

Result<RestoredShard> ReadShardState(const std::string& path, const ShardConfig& config) {
  pstrain::ShardState s;
  PSTRAIN_RETURN_IF_ERROR(ReadBinaryProto(path, &s));
  PSTRAIN_RETURN_IF_ERROR(CheckHeader(s, config).WithContext(path));
  std::vector<pstrain::ParamMeta> params(s.params().begin(), s.params().end());
  RestoredShard restored;
  auto layout = MakeShardLayout(std::move(params), config);
  if (!layout.ok()) return layout.status().WithContext(path);
  restored.layout = std::move(layout).value();
  PSTRAIN_RETURN_IF_ERROR(LoadChunks(s, *restored.layout.store).WithContext(path));
  ShardProgress& p = restored.progress;
  p.version = s.version();
  p.pushes_applied = s.pushes_applied();
  p.worker_clocks.assign(s.worker_clocks().begin(), s.worker_clocks().end());
  p.staleness_max = s.staleness_max();
  p.staleness_histogram.assign(s.staleness_histogram().begin(), s.staleness_histogram().end());
  return restored;
}

}  // namespace pstrain::server

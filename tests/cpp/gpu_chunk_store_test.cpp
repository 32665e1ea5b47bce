// ChunkStore on a CUDA device against the same store on the CPU: weights,
// history, snapshots and checkpoint-style SetWeights/SetHistory round trips
// must be equal bit for bit. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <vector>

#include "common/rng.hpp"
#include "server/chunk_store.hpp"
#include "tests/cpp/layer_test_util.hpp"

namespace pstrain::server {
namespace {

// Params of 5000 and 300 floats in chunks of 1024 floats, one shard.
KeyPlacement Placement() { return KeyPlacement::Create({5000, 300}, 1, 4096).value(); }

std::vector<float> Random(int64_t n, Rng& rng) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.Uniform(-1.f, 1.f);
  return v;
}

void ExpectSame(std::span<const float> cpu, std::span<const float> gpu, const char* what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(cpu[i], gpu[i]) << what << "[" << i << "]";
  }
}

TEST(GpuChunkStoreTest, MatchesTheCpuStore) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  for (const char* type : {"SGD", "Adam"}) {
    SCOPED_TRACE(type);
    optim::SolverHyper hyper;
    hyper.type = type;
    hyper.base_lr = 0.01f;
    hyper.momentum = 0.9f;
    hyper.weight_decay = 5e-4f;
    const std::vector<optim::ParamHyper> mults = {{1, 1}, {2, 0}};
    auto cpu = ChunkStore::Create(Placement(), 0, mults, hyper);
    auto gpu = ChunkStore::Create(Placement(), 0, mults, hyper, /*device=*/0);
    ASSERT_TRUE(cpu.ok()) << cpu.status().message();
    ASSERT_TRUE(gpu.ok()) << gpu.status().message();
    EXPECT_EQ(gpu->device(), 0);
    EXPECT_EQ(cpu->device(), -1);
    Rng rng(3);
    for (uint32_t id : cpu->chunk_ids()) {
      const std::vector<float> w = Random(cpu->length(id), rng);
      cpu->SetWeights(id, w);
      gpu->SetWeights(id, w);
    }
    for (int step = 0; step < 4; ++step) {
      for (uint32_t id : cpu->chunk_ids()) {
        std::vector<float> g = Random(cpu->length(id), rng);
        std::vector<float> g_copy = g;
        cpu->ApplyGradientInPlace(id, g.data(), 0.5f, step);
        gpu->ApplyGradientInPlace(id, g_copy.data(), 0.5f, step);
        auto snapshot = gpu->Snapshot(id);
        ExpectSame(cpu->weights(id), *snapshot, "snapshot");
      }
    }
    for (uint32_t id : cpu->chunk_ids()) {
      ExpectSame(cpu->weights(id), gpu->weights(id), "weights");
      for (int k = 0; k < cpu->history_slots(); ++k) {
        ExpectSame(cpu->history(id, k), gpu->history(id, k), "history");
      }
    }
    // A restored history reaches the device.
    const uint32_t first = cpu->chunk_ids()[0];
    const std::vector<float> h = Random(cpu->length(first), rng);
    gpu->SetHistory(first, 0, h);
    ExpectSame(h, gpu->history(first, 0), "restored history");
  }
}

}  // namespace
}  // namespace pstrain::server

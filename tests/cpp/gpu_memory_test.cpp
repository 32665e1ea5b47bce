// GPU foundation: SyncedMemory head states and round trips, Blob's device
// views, the caching allocator, error statuses, and the kGpu engine's
// fallback to the CPU path. Tests that need a device skip without one.
#include <gtest/gtest.h>

#include <vector>

#include "common/blob.hpp"
#include "common/device.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "worker/layer.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include "common/cuda/cuda_check.hpp"
#include "common/cuda/device_allocator.hpp"
#include "common/cuda/gpu_context.hpp"
#include "common/cuda/math_gpu.hpp"
#endif

namespace pstrain {
namespace {

// y = 2x, with a fast path that counts its calls.
class DoubleLayer : public Layer {
 public:
  DoubleLayer() : Layer(caffe::LayerParameter()) {}
  const char* type() const override { return "Double"; }
  bool HasFastPath() const override { return true; }
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override {
    top[0]->ReshapeLike(*bottom[0]);
    return Status::Ok();
  }
  int fast_calls = 0;

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override {
    for (int64_t i = 0; i < bottom[0]->count(); ++i) {
      top[0]->mutable_cpu_data()[i] = 2.f * bottom[0]->cpu_data()[i];
    }
  }
  void BackwardReference(const BlobVec& top, const std::vector<bool>&,
                         const BlobVec& bottom) override {
    for (int64_t i = 0; i < top[0]->count(); ++i) {
      bottom[0]->mutable_cpu_diff()[i] = 2.f * top[0]->cpu_diff()[i];
    }
  }
  void ForwardFast(const BlobVec& bottom, const BlobVec& top) override {
    ++fast_calls;
    ForwardReference(bottom, top);
  }
  void BackwardFast(const BlobVec& top, const std::vector<bool>& down,
                    const BlobVec& bottom) override {
    ++fast_calls;
    BackwardReference(top, down, bottom);
  }
};

// Runs without a device too: a layer without a GPU path runs its fast CPU path.
TEST(GpuEngineTest, LayerWithoutGpuPathRunsFastCpuPath) {
  DoubleLayer layer;
  layer.set_engine(Engine::kGpu);
  EXPECT_FALSE(layer.HasGpuPath());
  Blob bottom({3});
  Blob top;
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  for (int i = 0; i < 3; ++i) bottom.mutable_cpu_data()[i] = static_cast<float>(i + 1);
  layer.Forward({&bottom}, {&top});
  for (int i = 0; i < 3; ++i) top.mutable_cpu_diff()[i] = 1.f;
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_EQ(layer.fast_calls, 2);
  EXPECT_EQ(top.cpu_data()[2], 6.f);
  EXPECT_EQ(bottom.cpu_diff()[0], 2.f);
}

#ifndef PSTRAIN_HAVE_CUDA

TEST(GpuMemoryTest, NeedsCuda) { GTEST_SKIP() << DeviceSummary(); }

#else

using Head = SyncedMemory::Head;

TEST(GpuMemoryTest, StatusesNameTheError) {
  const Status s = CudaStatus(cudaErrorMemoryAllocation, "copying weights");
  EXPECT_EQ(s.message(), "copying weights: cudaErrorMemoryAllocation (out of memory)");
  EXPECT_TRUE(CudaStatus(cudaSuccess, "x").ok());
  EXPECT_EQ(CublasStatus(CUBLAS_STATUS_ALLOC_FAILED, "gemm")
                .message()
                .rfind("gemm: CUBLAS_STATUS_ALLOC_FAILED (", 0),
            0u);
  EXPECT_EQ(CudnnStatus(CUDNN_STATUS_BAD_PARAM, "conv").message(), "conv: CUDNN_STATUS_BAD_PARAM");
}

TEST(GpuMemoryTest, SelectDeviceRejectsMissingDevice) {
  const Status s = GpuContext::ForThisThread().SelectDevice(1000);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("device 1000"), std::string::npos) << s.message();
}

TEST(GpuMemoryTest, FailedAllocationNamesTheSize) {
  Result<void*> p = TryDeviceAlloc(size_t{1} << 50);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("cannot allocate 1125899906842624 bytes (1073741824.0 MiB)"),
            std::string::npos)
      << p.status().message();
}

TEST(GpuMemoryTest, SizeClasses) {
  EXPECT_EQ(DeviceSizeClass(1), 512u);
  EXPECT_EQ(DeviceSizeClass(512), 512u);
  EXPECT_EQ(DeviceSizeClass(513), 640u);
  EXPECT_EQ(DeviceSizeClass(1024), 1024u);
  EXPECT_EQ(DeviceSizeClass(1025), 1280u);
  EXPECT_EQ(DeviceSizeClass(3 << 20), 3u << 20);
  EXPECT_EQ(DeviceSizeClass((3 << 20) + 1), 7u << 19);
}

TEST(GpuMemoryTest, HostDeviceRoundTrip) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  SyncedMemory m(1000);
  EXPECT_EQ(m.head(), Head::kUninitialized);
  float* h = m.mutable_host_data();
  EXPECT_EQ(m.head(), Head::kAtHost);
  for (int i = 0; i < 1000; ++i) h[i] = static_cast<float>(i);
  const float* d = m.device_data();
  EXPECT_EQ(m.head(), Head::kSynced);
  EXPECT_EQ(m.mutable_device_data(), d);
  EXPECT_EQ(m.head(), Head::kAtDevice);
  GpuScaleCopy(1000, 2.f, m.mutable_device_data(), m.mutable_device_data());
  const float* back = m.host_data();
  EXPECT_EQ(m.head(), Head::kSynced);
  EXPECT_EQ(back, h);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(back[i], 2.f * i) << i;
  // A host write makes the next device read upload again.
  m.mutable_host_data()[7] = -1.f;
  EXPECT_EQ(m.head(), Head::kAtHost);
  float v = 0;
  ASSERT_EQ(cudaMemcpy(&v, m.device_data() + 7, sizeof(v), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(v, -1.f);
}

// A host write waits for the upload still reading the host buffer, and for
// nothing queued after it: a parameter-server worker writes pulled weights
// while its backward pass is still queued (worker/ps/ps_worker.cpp, early pull).
TEST(GpuMemoryTest, HostWriteWaitsForItsUploadOnlyNotTheWholeStream) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  SyncedMemory m(1000);
  float* h = m.mutable_host_data();
  for (int i = 0; i < 1000; ++i) h[i] = static_cast<float>(i);
  const float* d = m.device_data();  // the upload, queued
  // Then tens of milliseconds of other work on the same stream.
  GpuContext& gpu = GpuContext::ForThisThread();
  const size_t bytes = size_t{1} << 30;
  void* big = DeviceAlloc(bytes);
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(cudaMemsetAsync(big, i, bytes, gpu.stream()), cudaSuccess);
  }
  float* again = m.mutable_host_data();
  EXPECT_EQ(cudaStreamQuery(gpu.stream()), cudaErrorNotReady)
      << "the host write waited for the whole stream";
  (void)cudaGetLastError();  // NotReady is recorded as the thread's last error
  again[7] = -1.f;           // the upload has read the buffer: the device keeps 7
  gpu.Synchronize();
  DeviceFree(big);
  float v = 0;
  ASSERT_EQ(cudaMemcpy(&v, d + 7, sizeof(v), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(v, 7.f);
  ASSERT_EQ(cudaMemcpy(&v, m.device_data() + 7, sizeof(v), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(v, -1.f);
}

TEST(GpuMemoryTest, FirstDeviceAccessIsZeroed) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  SyncedMemory m(300);
  m.mutable_device_data();
  EXPECT_EQ(m.head(), Head::kAtDevice);
  const float* h = m.host_data();
  for (int i = 0; i < 300; ++i) ASSERT_EQ(h[i], 0.f);
}

TEST(GpuMemoryTest, BlobViewsAndOperationsFollowTheHead) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  Blob a({2, 3});
  for (int i = 0; i < 6; ++i) a.mutable_cpu_data()[i] = static_cast<float>(i);
  GpuScaleCopy(6, 3.f, a.mutable_gpu_data(), a.mutable_gpu_data());
  EXPECT_EQ(a.cpu_data()[5], 15.f);
  EXPECT_EQ(a.SumSquaresData(), 9.0 * (0 + 1 + 4 + 9 + 16 + 25));

  GpuSet(6, 4.f, a.mutable_gpu_diff());
  EXPECT_EQ(a.diff_memory()->head(), Head::kAtDevice);
  EXPECT_EQ(a.cpu_diff()[3], 4.f);
  a.SetDiffZero();  // diff synced: zeroed on the device
  EXPECT_EQ(a.diff_memory()->head(), Head::kAtDevice);
  EXPECT_EQ(a.SumSquaresDiff(), 0.0);

  Blob b({2, 3});
  GpuScaleCopy(6, 2.f, a.gpu_data(), a.mutable_gpu_data());  // a's data only on the device
  b.CopyFrom(a);
  EXPECT_EQ(b.data_memory()->head(), Head::kAtDevice);
  EXPECT_EQ(b.cpu_data()[4], 24.f);
  Blob c;
  c.CopyFrom(b, false, true);  // b synced, c fresh: host copy
  EXPECT_EQ(c.data_memory()->head(), Head::kAtHost);
  EXPECT_EQ(c.cpu_data()[1], 6.f);
}

TEST(GpuMemoryTest, AllocatorReusesFreedBlocks) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const DeviceMemoryStats before = GetDeviceMemoryStats();
  void* p = DeviceAlloc(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(GetDeviceMemoryStats().in_use_bytes, before.in_use_bytes + 1024);
  DeviceFree(p);
  EXPECT_EQ(GetDeviceMemoryStats().cached_bytes, before.cached_bytes + 1024);
  void* q = DeviceAlloc(900);  // same size class
  EXPECT_EQ(q, p);
  const DeviceMemoryStats after = GetDeviceMemoryStats();
  EXPECT_EQ(after.cuda_mallocs, before.cuda_mallocs + 1);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  void* r = DeviceAlloc(5000);  // another class: a new block
  EXPECT_NE(r, q);
  DeviceFree(q);
  DeviceFree(r);
  EXPECT_EQ(GetDeviceMemoryStats().in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(DeviceAlloc(0), nullptr);
  DeviceFree(nullptr);
}

TEST(GpuMemoryTest, PinnedAllocation) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  Result<void*> pinned = TryPinnedAlloc(4096);
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  float* p = static_cast<float*>(pinned.value());
  ASSERT_NE(p, nullptr);
  p[1023] = 1.f;
  PinnedFree(p);
}

#endif  // PSTRAIN_HAVE_CUDA

}  // namespace
}  // namespace pstrain

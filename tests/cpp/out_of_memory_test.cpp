// Running out of memory is one ResourceExhausted error naming the request
// and the free memory, for host memory (everywhere) and for device and
// pinned memory (GpuOutOfMemoryTest, skipped without a CUDA device): from the
// allocators, through SyncedMemory, the trainer, and the programs, which
// print one line and exit 1. The requests are beyond any machine (2^48
// bytes exceeds the user address space; 16 TiB of device or pinned memory)
// or beyond an address-space limit set for the program, so nothing is taken.
#include "common/out_of_memory.hpp"

#include <gtest/gtest.h>

#include <new>
#include <string>

#include "common/exit_code.hpp"
#include "common/synced_memory.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/gpu_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "tests/cpp/program_path.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include "common/cuda/device_allocator.hpp"
#endif

namespace pstrain::testing {
namespace {

constexpr size_t kHugeFloats = size_t{1} << 46;  // 2^48 bytes
const std::string kHugeBytes = "281474976710656 bytes (268435456.0 MiB)";

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

TEST(OutOfMemoryTest, HostMemoryOfSyncedMemory) {
  SyncedMemory memory(kHugeFloats);
  try {
    (void)memory.mutable_host_data();
    FAIL() << "allocated 2^48 bytes";
  } catch (const OutOfMemoryError& e) {
    EXPECT_TRUE(e.status().IsResourceExhausted());
    EXPECT_TRUE(StartsWith(e.status().message(),
                           "cannot allocate " + kHugeBytes + " of host memory (host: "))
        << e.status().message();
    EXPECT_NE(e.status().message().find(" MiB free of "), std::string::npos);
    EXPECT_EQ(std::string(e.what()), e.status().message());
  }
  // Nothing was taken: a later small buffer works.
  SyncedMemory small(4);
  EXPECT_EQ(small.host_data()[3], 0.f);
}

TEST(OutOfMemoryTest, CatchOutOfMemoryGivesTheStatus) {
  EXPECT_TRUE(CatchOutOfMemory([] { return Status::Ok(); }).ok());
  EXPECT_EQ(CatchOutOfMemory([] { return Status::NotFound("f"); }).ToString(), "NotFound: f");
  const Status ours =
      CatchOutOfMemory([]() -> Status { throw OutOfMemoryError(HostOutOfMemory(8)); });
  EXPECT_TRUE(ours.IsResourceExhausted());
  EXPECT_TRUE(StartsWith(ours.message(), "cannot allocate 8 bytes (0.0 MiB) of host memory"));
  const Status plain = CatchOutOfMemory([]() -> Status { throw std::bad_alloc(); });
  EXPECT_TRUE(plain.IsResourceExhausted());
  EXPECT_TRUE(StartsWith(plain.message(), "out of host memory (")) << plain.message();
  EXPECT_EQ(ExitCodeFor(plain), 1);
  EXPECT_EQ(ExitOnOutOfMemory("p", [] { return 7; }), 7);
  EXPECT_EQ(ExitOnOutOfMemory("p", []() -> int { throw OutOfMemoryError(HostOutOfMemory(8)); }), 1);
}

// ps-net train under a 6 GiB address-space limit (ulimit -v) on a net whose
// DummyData top needs 8 GiB (blobs from a prototxt stay under 2^31
// elements): the trainer's ResourceExhausted, printed as one line, exit 1.
// The allocation fails before any page is touched.
TEST(OutOfMemoryTest, PsNetTrainReportsHostMemory) {
  TempDir dir;
  WriteTextFile(dir / "net.prototxt", R"(name: "huge"
layer { name: "data" type: "DummyData" top: "x"
        dummy_data_param { shape { dim: 2 dim: 1024 dim: 1024 dim: 1023 }
                           data_filler { type: "constant" value: 1 } } }
)");
  WriteTextFile(dir / "solver.prototxt", "net: \"" + (dir / "net.prototxt") +
                                             "\"\nbase_lr: 0.1\nlr_policy: \"fixed\"\n"
                                             "max_iter: 1\nsnapshot_after_train: false\n");
  const ProgramRun run = RunProgramBounded(
      {"/bin/sh", "-c", "ulimit -v 6291456 && exec \"$0\" \"$@\"", ProgramPath("ps-net"),
       "train", "--solver", dir / "solver.prototxt"},
      60);
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(StartsWith(run.err,
                         "ps-net: cannot allocate 8581545984 bytes (8184.0 MiB) of host "
                         "memory (host: "))
      << run.err;
  EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << "more than one line: " << run.err;
}

#ifdef PSTRAIN_HAVE_CUDA

constexpr size_t kHugeDeviceBytes = size_t{1} << 44;  // 16 TiB
const std::string kHugeDeviceText = "17592186044416 bytes (16777216.0 MiB)";

TEST(GpuOutOfMemoryTest, DeviceAndPinnedAllocations) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const Result<void*> device = TryDeviceAlloc(kHugeDeviceBytes);
  ASSERT_FALSE(device.ok());
  EXPECT_TRUE(device.status().IsResourceExhausted()) << device.status().ToString();
  EXPECT_TRUE(StartsWith(
      device.status().message(),
      "cannot allocate " + kHugeDeviceText + " on CUDA device 0: out of memory (device 0: "))
      << device.status().message();
  EXPECT_NE(device.status().message().find(" MiB free of "), std::string::npos);
  EXPECT_NE(device.status().message().find("PSTrain holds "), std::string::npos);
  try {
    (void)DeviceAlloc(kHugeDeviceBytes);
    FAIL() << "DeviceAlloc of 16 TiB returned";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.status().message().substr(0, 60), device.status().message().substr(0, 60));
  }
  SyncedMemory memory(kHugeDeviceBytes / sizeof(float));
  EXPECT_THROW((void)memory.mutable_device_data(), OutOfMemoryError);

  const Result<void*> pinned = TryPinnedAlloc(kHugeDeviceBytes);
  ASSERT_FALSE(pinned.ok());
  EXPECT_TRUE(pinned.status().IsResourceExhausted()) << pinned.status().ToString();
  EXPECT_TRUE(StartsWith(
      pinned.status().message(),
      "cannot allocate " + kHugeDeviceText + " of pinned host memory: out of memory (host: "))
      << pinned.status().message();
  EXPECT_NE(pinned.status().message().find("; device 0: "), std::string::npos);

  // The device still works: nothing was left half-allocated or in error.
  const Result<void*> small = TryDeviceAlloc(1024);
  ASSERT_TRUE(small.ok()) << small.status().message();
  DeviceFree(small.value());
}

// A GPU InnerProduct whose top needs 2^38 bytes (256 GiB), more than any
// current GPU: ps-net train --gpu 0 ends with one line and exit 1.
TEST(GpuOutOfMemoryTest, PsNetTrainOnTheGpu) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  TempDir dir;
  WriteTextFile(dir / "net.prototxt", R"(name: "wide"
layer { name: "data" type: "DummyData" top: "x"
        dummy_data_param { shape { dim: 65536 dim: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
        inner_product_param { num_output: 1048576 weight_filler { type: "constant" value: 0.001 } } }
)");
  WriteTextFile(dir / "solver.prototxt", "net: \"" + (dir / "net.prototxt") +
                                             "\"\nbase_lr: 0.1\nlr_policy: \"fixed\"\n"
                                             "max_iter: 1\nsnapshot_after_train: false\n");
  const ProgramRun run = RunProgramBounded({ProgramPath("ps-net"), "train", "--solver",
                                            dir / "solver.prototxt", "--gpu", "0"},
                                           120);
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(StartsWith(run.err,
                         "ps-net: cannot allocate 274877906944 bytes (262144.0 MiB) on "
                         "CUDA device 0: out of memory (device 0: "))
      << run.err;
  EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << "more than one line: " << run.err;
}

#endif  // PSTRAIN_HAVE_CUDA

}  // namespace
}  // namespace pstrain::testing

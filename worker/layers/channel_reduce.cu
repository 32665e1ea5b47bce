// Per-channel reductions of the layers' GPU paths (declared in
// layer_kernels.cuh): BatchNorm's statistics and gradient sums, the Scale,
// Bias and InnerProduct parameter gradients, the loss layers' totals.
//
// Pass 1 (ChannelChunkSums): a 2-D grid, x over a channel's chunks, y over
// channels (striding when there are more than 65535). A chunk is a run of
// consecutive positions j = o * inner + i of one channel; each thread walks
// its positions kReduceThreads apart, carrying (row, column) forward with
// additions only (no division or modulo in the loop), and the block adds its
// threads' double sums in a fixed tree order. Pass 2 (ChannelFinish), only
// when a channel has more than one chunk: one warp per channel adds the
// chunk sums in a fixed order. Chunk counts and lengths are functions of the
// sizes alone (not of the device), so every run on every GPU adds the same
// numbers in the same order.
#include <algorithm>
#include <climits>

#include "common/cuda/device_allocator.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

constexpr int kReduceThreads = 256;  // a multiple of the warp size
constexpr int kWarp = 32;
// Enough blocks to fill any current GPU several times over; a fixed number
// (not the device's SM count) keeps the summation order device-independent.
constexpr int64_t kTargetBlocks = 2048;
// A block sums at least this many elements (16 per thread) before the work
// is split further: below it the second pass costs more than it saves.
constexpr int64_t kMinChunk = 16 * kReduceThreads;
constexpr int64_t kMaxGridY = 65535;

__device__ double WarpSum(double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

// The sum of every thread's v, valid in thread 0; fixed order. All threads
// of the block must call it.
__device__ double BlockSum(double v) {
  __shared__ double warp_sums[kReduceThreads / kWarp];
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  v = WarpSum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  double total = 0.0;
  if (warp == 0) {
    total = lane < static_cast<int>(blockDim.x / kWarp) ? warp_sums[lane] : 0.0;
    total = WarpSum(total);
  }
  __syncthreads();  // warp_sums is reused by the next call
  return total;
}

__device__ void WriteChannel(const ChannelSumOutput& out, int64_t d, double total) {
  const double value = out.divisor > 0.0 ? total / out.divisor : total;
  if (out.exact != nullptr) out.exact[d] = value;
  if (out.values != nullptr) {
    const float v = static_cast<float>(value);
    out.values[d] = out.accumulate ? out.values[d] + v : v;
  }
}

template <ChannelTerm kTerm, typename Index>
__device__ double Term(const float* a, const float* b, double center, Index index) {
  if constexpr (kTerm == ChannelTerm::kValue) {
    return static_cast<double>(a[index]);
  } else if constexpr (kTerm == ChannelTerm::kProduct) {
    return static_cast<double>(a[index]) * static_cast<double>(b[index]);
  } else {
    const double deviation = static_cast<double>(a[index]) - center;
    return deviation * deviation;
  }
}

// Block (x, y): chunk x of channels y, y + gridDim.y, ...; m = outer * inner
// positions per channel, chunk_len of them per chunk. With chunks == 1 the
// block's total is the channel's and goes to `out`; otherwise to
// partial[d * chunks + x].
template <ChannelTerm kTerm, typename Index>
__global__ void ChannelChunkSums(Index dim, Index inner, Index m, Index chunk_len, Index chunks,
                                 const float* a, const float* b, const double* center,
                                 double* partial, ChannelSumOutput out) {
  const Index row_stride = dim * inner;
  const Index step = blockDim.x;
  const Index step_cols = step % inner;
  // Moving j by `step` moves the flat index by this much, plus
  // (row_stride - inner) more when the column wraps.
  const Index jump = (step / inner) * row_stride + step_cols;
  const Index begin = static_cast<Index>(blockIdx.x) * chunk_len;
  const Index end = begin + chunk_len < m ? begin + chunk_len : m;
  const Index first = begin + threadIdx.x;
  for (Index d = blockIdx.y; d < dim; d += gridDim.y) {
    const double c = kTerm == ChannelTerm::kSquaredDeviation ? center[d] : 0.0;
    double sum = 0.0;
    if (first < end) {
      Index col = first % inner;
      Index index = (first / inner) * row_stride + d * inner + col;
#pragma unroll 4
      for (Index j = first; j < end; j += step) {
        sum += Term<kTerm>(a, b, c, index);
        index += jump;
        col += step_cols;
        if (col >= inner) {
          col -= inner;
          index += row_stride - inner;
        }
      }
    }
    const double total = BlockSum(sum);
    if (threadIdx.x == 0) {
      if (chunks == 1) {
        WriteChannel(out, d, total);
      } else {
        partial[d * chunks + blockIdx.x] = total;
      }
    }
  }
}

// One warp per channel: the channel's `chunks` partial sums, in order
// within each lane, lanes added in a fixed tree order. chunks == 0: 0.
__global__ void ChannelFinish(int64_t dim, int64_t chunks, const double* partial,
                              ChannelSumOutput out) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t d = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; d < dim;
       d += warps) {
    double sum = 0.0;
    for (int64_t k = lane; k < chunks; k += kWarp) sum += partial[d * chunks + k];
    sum = WarpSum(sum);
    if (lane == 0) WriteChannel(out, d, sum);
  }
}

struct ChunkPlan {
  int64_t chunks;     // per channel; 0 when a channel has no elements
  int64_t chunk_len;  // positions per chunk
};

ChunkPlan PlanChunks(int64_t dim, int64_t m) {
  if (m <= 0) return {0, 0};
  const int64_t wanted = (kTargetBlocks + dim - 1) / dim;
  const int64_t useful = (m + kMinChunk - 1) / kMinChunk;
  int64_t chunks = std::clamp<int64_t>(std::min(wanted, useful), 1, INT_MAX);
  const int64_t chunk_len = (m + chunks - 1) / chunks;
  chunks = (m + chunk_len - 1) / chunk_len;
  return {chunks, chunk_len};
}

template <ChannelTerm kTerm, typename Index>
void LaunchChunkSums(int64_t dim, int64_t inner, int64_t m, const ChunkPlan& plan, const float* a,
                     const float* b, const double* center, double* partial,
                     const ChannelSumOutput& out) {
  const dim3 grid(static_cast<unsigned>(plan.chunks),
                  static_cast<unsigned>(std::min(dim, kMaxGridY)));
  ChannelChunkSums<kTerm, Index><<<grid, kReduceThreads, 0, LayerStream()>>>(
      static_cast<Index>(dim), static_cast<Index>(inner), static_cast<Index>(m),
      static_cast<Index>(plan.chunk_len), static_cast<Index>(plan.chunks), a, b, center, partial,
      out);
  PSTRAIN_CUDA_CHECK(cudaGetLastError());
}

template <ChannelTerm kTerm>
void ChunkSums(int64_t outer, int64_t dim, int64_t inner, const ChunkPlan& plan, const float* a,
               const float* b, const double* center, double* partial, const ChannelSumOutput& out) {
  const int64_t m = outer * inner;
  // 32-bit only when every flat index, and one jump past the end, fits.
  const int64_t count = outer * dim * inner;
  const int64_t jump = kReduceThreads * dim + kReduceThreads;
  if (count <= INT32_MAX && jump <= INT32_MAX) {
    LaunchChunkSums<kTerm, uint32_t>(dim, inner, m, plan, a, b, center, partial, out);
  } else {
    LaunchChunkSums<kTerm, int64_t>(dim, inner, m, plan, a, b, center, partial, out);
  }
}

}  // namespace

void GpuChannelReduce(int64_t outer, int64_t dim, int64_t inner, ChannelTerm term, const float* a,
                      const float* b, const double* center, const ChannelSumOutput& out) {
  if (dim <= 0) return;
  const ChunkPlan plan = PlanChunks(dim, outer * inner);
  double* partial = nullptr;
  if (plan.chunks > 1) {
    partial = static_cast<double*>(DeviceAlloc(sizeof(double) * dim * plan.chunks));
  }
  if (plan.chunks > 0) {
    switch (term) {
      case ChannelTerm::kValue:
        ChunkSums<ChannelTerm::kValue>(outer, dim, inner, plan, a, b, center, partial, out);
        break;
      case ChannelTerm::kProduct:
        ChunkSums<ChannelTerm::kProduct>(outer, dim, inner, plan, a, b, center, partial, out);
        break;
      case ChannelTerm::kSquaredDeviation:
        ChunkSums<ChannelTerm::kSquaredDeviation>(outer, dim, inner, plan, a, b, center, partial,
                                                  out);
        break;
    }
  }
  if (plan.chunks != 1) {  // several chunks, or none (every total 0)
    const int warps_per_block = kReduceThreads / kWarp;
    const int64_t blocks = std::min<int64_t>((dim + warps_per_block - 1) / warps_per_block, 32768);
    ChannelFinish<<<static_cast<unsigned>(blocks), kReduceThreads, 0, LayerStream()>>>(
        dim, plan.chunks, partial, out);
    PSTRAIN_CUDA_CHECK(cudaGetLastError());
  }
  // Stream-ordered: a later user of the block on this stream runs after the
  // kernels above; other streams wait for them (DeviceFree's contract).
  if (partial != nullptr) DeviceFree(partial);
}

void GpuChannelSum(int64_t outer, int64_t dim, int64_t inner, const float* a, const float* b,
                   bool accumulate, float* out) {
  ChannelSumOutput output;
  output.values = out;
  output.accumulate = accumulate;
  GpuChannelReduce(outer, dim, inner, b == nullptr ? ChannelTerm::kValue : ChannelTerm::kProduct, a,
                   b, nullptr, output);
}

void GpuChannelMeanVariance(int64_t outer, int64_t dim, int64_t inner, const float* x, float* mean,
                            float* variance) {
  if (dim <= 0) return;
  const int64_t m = outer * inner;
  double* center = static_cast<double*>(DeviceAlloc(sizeof(double) * dim));
  ChannelSumOutput mean_out;
  mean_out.divisor = m > 0 ? static_cast<double>(m) : 1.0;  // 0 / 1 for an empty channel
  mean_out.values = mean;
  mean_out.exact = center;
  GpuChannelReduce(outer, dim, inner, ChannelTerm::kValue, x, nullptr, nullptr, mean_out);
  ChannelSumOutput variance_out;
  variance_out.divisor = mean_out.divisor;
  variance_out.values = variance;
  GpuChannelReduce(outer, dim, inner, ChannelTerm::kSquaredDeviation, x, nullptr, center,
                   variance_out);
  DeviceFree(center);
}

}  // namespace pstrain

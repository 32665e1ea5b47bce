#include "server/encoded_gradient.hpp"

#include <algorithm>
#include <cstring>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "common/status.hpp"
#include "common/transport/gradient_codec.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pstrain::server {
namespace {

using transport::FloatAt;
using transport::HalfAt;
using transport::WordAt;

void HalvesScalar(const void* data, uint64_t begin, uint64_t end, float* out) {
  for (uint64_t i = begin; i < end; ++i) out[i - begin] = transport::HalfToFloat(HalfAt(data, i));
}

// bfloat16 is float32's top half: exact, and vectorised by the compiler.
void BFloat16s(const void* data, uint64_t begin, uint64_t end, float* out) {
  for (uint64_t i = begin; i < end; ++i) {
    const uint32_t bits = static_cast<uint32_t>(HalfAt(data, i)) << 16;
    std::memcpy(out + (i - begin), &bits, sizeof(bits));
  }
}

// The first of the 16-bit values [0, n) at `data` whose exponent bits (`mask`)
// are all set (an infinity or a NaN), or -1. Branch-free per block
// (vectorised), an exact search only in a bad block.
int64_t FirstAllOnesExponent(const void* data, uint64_t n, uint32_t mask) {
  constexpr uint64_t kBlock = 4096;
  for (uint64_t start = 0; start < n; start += kBlock) {
    const uint64_t end = std::min(n, start + kBlock);
    uint32_t bad = 0;
    for (uint64_t i = start; i < end; ++i) {
      bad |= static_cast<uint32_t>((HalfAt(data, i) & mask) == mask);
    }
    if (bad == 0) continue;
    for (uint64_t i = start; i < end; ++i) {
      if ((HalfAt(data, i) & mask) == mask) return static_cast<int64_t>(i);
    }
  }
  return -1;
}

#if defined(__x86_64__)
// vcvtph2ps: exact, as HalfToFloat (the finite check has refused NaN and
// infinity before any value is decoded).
__attribute__((target("avx,f16c"))) void HalvesF16c(const void* data, uint64_t begin, uint64_t end,
                                                    float* out) {
  const char* in = static_cast<const char*>(data) + 2 * begin;
  const uint64_t n = end - begin;
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  HalvesScalar(data, begin + i, end, out + i);
}
#endif

// CPUID leaf 1 (ECX: bit 29 F16C, bit 28 AVX, bit 27 OSXSAVE) and XGETBV (the
// OS saves the YMM registers): read directly, since clang's
// __builtin_cpu_supports does not know "f16c" (the fuzzing build uses clang).
const bool kF16c = [] {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool f16c = (ecx >> 29) & 1, avx = (ecx >> 28) & 1, osxsave = (ecx >> 27) & 1;
  if (!(f16c && avx && osxsave)) return false;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0x6) == 0x6;  // XMM and YMM state enabled
#else
  return false;
#endif
}();

}  // namespace

bool HasF16c() { return kF16c; }

void DecodeRange(const EncodedGradient& g, uint64_t begin, uint64_t end, float* out) {
  switch (g.dtype) {
    case pstrain::FLOAT32:
      std::memcpy(out, g.floats() + begin, (end - begin) * sizeof(float));
      return;
    case pstrain::FLOAT16:
#if defined(__x86_64__)
      if (kF16c) return HalvesF16c(g.data, begin, end, out);
#endif
      return HalvesScalar(g.data, begin, end, out);
    case pstrain::BFLOAT16:
      return BFloat16s(g.data, begin, end, out);
    case pstrain::TOP_K: {
      std::fill(out, out + (end - begin), 0.f);
      const uint64_t k = WordAt(g.data, 0);
      // Indices are words 1..k, ascending: the first one >= begin by bisection.
      uint64_t lo = 0, hi = k;
      while (lo < hi) {
        const uint64_t mid = (lo + hi) / 2;
        if (WordAt(g.data, 1 + mid) < begin)
          lo = mid + 1;
        else
          hi = mid;
      }
      for (uint64_t j = lo; j < k; ++j) {
        const uint64_t index = WordAt(g.data, 1 + j);
        if (index >= end) break;
        out[index - begin] = FloatAt(g.data, 1 + k + j);
      }
      return;
    }
    case pstrain::SIGN_SCALED: {
      const float scale = FloatAt(g.data, 0);
      for (uint64_t i = begin; i < end; ++i) {
        out[i - begin] = (WordAt(g.data, 1 + i / 32) >> (i % 32)) & 1u ? scale : -scale;
      }
      return;
    }
    default:
      PSTRAIN_CHECK_MSG(false, "DecodeRange of an unknown dtype");
  }
}

int64_t FirstNonFinite(const EncodedGradient& g, float* value) {
  switch (g.dtype) {
    case pstrain::FLOAT16:
    case pstrain::BFLOAT16: {
      const bool half = g.dtype == pstrain::FLOAT16;
      const int64_t i = FirstAllOnesExponent(g.data, g.n, half ? 0x7c00u : 0x7f80u);
      if (i >= 0) {
        const uint16_t bits = HalfAt(g.data, static_cast<uint64_t>(i));
        *value = half ? transport::HalfToFloat(bits) : transport::BFloat16ToFloat(bits);
      }
      return i;
    }
    case pstrain::TOP_K: {
      const uint64_t k = WordAt(g.data, 0);
      for (uint64_t j = 0; j < k; ++j) {
        const float v = FloatAt(g.data, 1 + k + j);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        if ((bits & 0x7f800000u) == 0x7f800000u) {
          *value = v;
          return static_cast<int64_t>(WordAt(g.data, 1 + j));
        }
      }
      return -1;
    }
    default:
      return -1;  // SIGN_SCALED: its one scale was checked finite
  }
}

}  // namespace pstrain::server

#include "server/encoded_gradient.hpp"

#include <algorithm>
#include <cstring>

#include "common/status.hpp"
#include "common/transport/gradient_codec.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pstrain::server {
namespace {

uint32_t Word(const void* data, size_t i) {
  uint32_t w;
  std::memcpy(&w, static_cast<const char*>(data) + 4 * i, 4);
  return w;
}
float FloatAt(const void* data, size_t i) {
  float f;
  std::memcpy(&f, static_cast<const char*>(data) + 4 * i, 4);
  return f;
}
uint16_t HalfAt(const void* data, size_t i) {  // value i: the low half of word i/2 when even
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(data) + 2 * i, 2);
  return h;
}

void HalvesScalar(const void* data, uint64_t begin, uint64_t end, float* out) {
  for (uint64_t i = begin; i < end; ++i) out[i - begin] = transport::HalfToFloat(HalfAt(data, i));
}

#if defined(__x86_64__)
// vcvtph2ps: exact, as HalfToFloat (the finite check has refused NaN and
// infinity before any value is decoded).
__attribute__((target("avx,f16c"))) void HalvesF16c(const void* data, uint64_t begin,
                                                    uint64_t end, float* out) {
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

const bool kF16c = [] {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
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
    case pstrain::TOP_K: {
      std::fill(out, out + (end - begin), 0.f);
      const uint64_t k = Word(g.data, 0);
      // Indices are words 1..k, ascending: the first one >= begin by bisection.
      uint64_t lo = 0, hi = k;
      while (lo < hi) {
        const uint64_t mid = (lo + hi) / 2;
        if (Word(g.data, 1 + mid) < begin) lo = mid + 1; else hi = mid;
      }
      for (uint64_t j = lo; j < k; ++j) {
        const uint64_t index = Word(g.data, 1 + j);
        if (index >= end) break;
        out[index - begin] = FloatAt(g.data, 1 + k + j);
      }
      return;
    }
    case pstrain::SIGN_SCALED: {
      const float scale = FloatAt(g.data, 0);
      for (uint64_t i = begin; i < end; ++i) {
        out[i - begin] = (Word(g.data, 1 + i / 32) >> (i % 32)) & 1u ? scale : -scale;
      }
      return;
    }
    default:
      PSTRAIN_CHECK_MSG(false, "DecodeRange of an unknown dtype");
  }
}

int64_t FirstNonFinite(const EncodedGradient& g, float* value) {
  switch (g.dtype) {
    case pstrain::FLOAT16: {
      // Branch-free per block (vectorised), exact search only in a bad block.
      constexpr uint64_t kBlock = 4096;
      for (uint64_t start = 0; start < g.n; start += kBlock) {
        const uint64_t end = std::min(g.n, start + kBlock);
        uint32_t bad = 0;
        for (uint64_t i = start; i < end; ++i) {
          bad |= static_cast<uint32_t>((HalfAt(g.data, i) & 0x7c00u) == 0x7c00u);
        }
        if (bad == 0) continue;
        for (uint64_t i = start; i < end; ++i) {
          if ((HalfAt(g.data, i) & 0x7c00u) == 0x7c00u) {
            *value = transport::HalfToFloat(HalfAt(g.data, i));
            return static_cast<int64_t>(i);
          }
        }
      }
      return -1;
    }
    case pstrain::TOP_K: {
      const uint64_t k = Word(g.data, 0);
      for (uint64_t j = 0; j < k; ++j) {
        const float v = FloatAt(g.data, 1 + k + j);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        if ((bits & 0x7f800000u) == 0x7f800000u) {
          *value = v;
          return static_cast<int64_t>(Word(g.data, 1 + j));
        }
      }
      return -1;
    }
    default:
      return -1;  // SIGN_SCALED: its one scale was checked finite
  }
}

}  // namespace pstrain::server

#include "common/transport/gradient_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace pstrain::transport {
namespace {

void PutWord(std::vector<float>* words, size_t i, uint32_t w) {
  std::memcpy(words->data() + i, &w, 4);
}

std::string N(uint64_t v) { return std::to_string(v); }

}  // namespace

Result<pstrain::DataType> ParseCompression(const std::string& name) {
  if (name == "none") return pstrain::FLOAT32;
  if (name == "fp16") return pstrain::FLOAT16;
  if (name == "bf16") return pstrain::BFLOAT16;
  if (name == "topk") return pstrain::TOP_K;
  if (name == "sign") return pstrain::SIGN_SCALED;
  return Status::InvalidArgument("compression \"" + name +
                                 "\" is not one of none, fp16, bf16, topk, sign");
}

Result<pstrain::DataType> ParsePullCompression(const std::string& name) {
  if (name == "none") return pstrain::FLOAT32;
  if (name == "fp16") return pstrain::FLOAT16;
  if (name == "bf16") return pstrain::BFLOAT16;
  return Status::InvalidArgument("pull compression \"" + name +
                                 "\" is not one of none, fp16, bf16");
}

bool IsHalfWidth(pstrain::DataType dtype) {
  return dtype == pstrain::FLOAT16 || dtype == pstrain::BFLOAT16;
}

const char* CompressionName(pstrain::DataType dtype) {
  switch (dtype) {
    case pstrain::FLOAT16:
      return "fp16";
    case pstrain::BFLOAT16:
      return "bf16";
    case pstrain::TOP_K:
      return "topk";
    case pstrain::SIGN_SCALED:
      return "sign";
    default:
      return "none";
  }
}

Status CheckEncoded(pstrain::DataType dtype, const void* data, size_t bytes, uint64_t n) {
  const std::string name = pstrain::DataType_Name(dtype);
  if (bytes % 4 != 0) return Status::InvalidArgument(name + " payload of " + N(bytes) + " bytes");
  const size_t words = bytes / 4;
  switch (dtype) {
    case pstrain::FLOAT16:
    case pstrain::BFLOAT16:
      if (words != (n + 1) / 2) {
        return Status::InvalidArgument(name + " payload has " + N(bytes) + " bytes, " + N(n) +
                                       " values need " + N((n + 1) / 2 * 4));
      }
      return Status::Ok();
    case pstrain::TOP_K: {
      if (words < 1) return Status::InvalidArgument("TOP_K payload is empty");
      const uint64_t k = WordAt(data, 0);
      if (k > n || words != 1 + 2 * k) {
        return Status::InvalidArgument("TOP_K payload says k = " + N(k) + " for " + N(n) +
                                       " values in " + N(bytes) + " bytes");
      }
      for (uint64_t j = 0; j < k; ++j) {
        const uint32_t index = WordAt(data, 1 + j);
        if (index >= n) return Status::InvalidArgument("TOP_K index " + N(index) + " >= " + N(n));
        if (j > 0 && index <= WordAt(data, j)) {
          return Status::InvalidArgument("TOP_K index " + N(index) + " after " +
                                         N(WordAt(data, j)));
        }
      }
      return Status::Ok();
    }
    case pstrain::SIGN_SCALED: {
      if (words != 1 + (n + 31) / 32) {
        return Status::InvalidArgument("SIGN_SCALED payload has " + N(bytes) + " bytes, " + N(n) +
                                       " values need " + N((1 + (n + 31) / 32) * 4));
      }
      const float scale = FloatAt(data, 0);
      if (!std::isfinite(scale) || scale < 0) {
        return Status::InvalidArgument("SIGN_SCALED scale " + std::to_string(scale) +
                                       " is not a finite number >= 0");
      }
      return Status::Ok();
    }
    default:
      return Status::InvalidArgument("dtype " + name + " is not a compressed encoding");
  }
}

void Decode(pstrain::DataType dtype, const void* data, size_t bytes, uint64_t n, float* out) {
  (void)bytes;
  switch (dtype) {
    case pstrain::FLOAT16:
      for (uint64_t i = 0; i < n; ++i) {
        const uint32_t w = WordAt(data, i / 2);
        out[i] = HalfToFloat(static_cast<uint16_t>(i % 2 == 0 ? w & 0xffffu : w >> 16));
      }
      return;
    case pstrain::BFLOAT16:
      for (uint64_t i = 0; i < n; ++i) {
        const uint32_t w = WordAt(data, i / 2);
        out[i] = BFloat16ToFloat(static_cast<uint16_t>(i % 2 == 0 ? w & 0xffffu : w >> 16));
      }
      return;
    case pstrain::TOP_K: {
      std::fill(out, out + n, 0.f);
      const uint64_t k = WordAt(data, 0);
      for (uint64_t j = 0; j < k; ++j) out[WordAt(data, 1 + j)] = FloatAt(data, 1 + k + j);
      return;
    }
    case pstrain::SIGN_SCALED: {
      const float scale = FloatAt(data, 0);
      for (uint64_t i = 0; i < n; ++i) {
        out[i] = (WordAt(data, 1 + i / 32) >> (i % 32)) & 1u ? scale : -scale;
      }
      return;
    }
    default:
      PSTRAIN_CHECK_MSG(false, "Decode of an uncompressed dtype");
  }
}

uint16_t FloatToHalf(float value) {
  uint32_t f;
  std::memcpy(&f, &value, 4);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {  // below the smallest normal half: a subnormal (or zero)
    // value = abs_float * 2^24 in half-subnormal units, rounded to nearest even.
    float magnitude;
    std::memcpy(&magnitude, &abs, 4);
    const float units = magnitude * 16777216.f;  // exact: a power of two
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(units)));
  }
  // Normal: rebias the exponent (127 -> 15), round the 13 dropped mantissa bits to even.
  const uint32_t rebased = abs - 0x38000000u;
  const uint32_t rounded = rebased + 0x0fffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  uint32_t f;
  if (exponent == 0x1f) {
    f = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {
    const float value = static_cast<float>(mantissa) / 16777216.f;  // mantissa * 2^-24
    std::memcpy(&f, &value, 4);
    f |= sign;
  } else {
    f = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}

uint16_t FloatToBFloat16(float value) {
  uint32_t f;
  std::memcpy(&f, &value, 4);
  if ((f & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep the sign, set the quiet bit
    return static_cast<uint16_t>((f >> 16) | 0x0040u);
  }
  // Round the 16 dropped bits to nearest even; a carry into the exponent is
  // the right answer (up to infinity from the largest finite values).
  const uint32_t rounded = f + 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float BFloat16ToFloat(uint16_t bits) {
  const uint32_t f = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}

size_t EncodeHalves(pstrain::DataType dtype, const float* values, size_t n,
                    std::vector<float>* words) {
  PSTRAIN_CHECK_MSG(IsHalfWidth(dtype), "EncodeHalves of a dtype other than FLOAT16, BFLOAT16");
  uint16_t (*encode)(float) = dtype == pstrain::FLOAT16 ? FloatToHalf : FloatToBFloat16;
  words->resize((n + 1) / 2);
  size_t overflow = n;
  for (size_t i = 0; i < n; i += 2) {
    const uint16_t lo = encode(values[i]);
    const uint16_t hi = i + 1 < n ? encode(values[i + 1]) : 0u;
    PutWord(words, i / 2, static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16));
    if (overflow == n) {
      // An infinite encoding (exponent all ones, mantissa zero) of a finite value.
      const uint16_t inf = dtype == pstrain::FLOAT16 ? 0x7c00u : 0x7f80u;
      if ((lo & 0x7fffu) == inf && std::isfinite(values[i])) {
        overflow = i;
      } else if (i + 1 < n && (hi & 0x7fffu) == inf && std::isfinite(values[i + 1])) {
        overflow = i + 1;
      }
    }
  }
  return overflow;
}

GradientEncoder::GradientEncoder(pstrain::DataType dtype, size_t n, double topk_ratio,
                                 bool error_feedback)
    : dtype_(dtype),
      n_(n),
      k_(std::clamp<size_t>(static_cast<size_t>(std::llround(topk_ratio * static_cast<double>(n))),
                            1, std::max<size_t>(n, 1))),
      feedback_(error_feedback && !IsHalfWidth(dtype)) {
  if (feedback_) residual_.assign(n, 0.f);
  corrected_.resize(n);
}

void GradientEncoder::Encode(const float* grad, std::vector<float>* words) {
  const float* g = grad;
  if (feedback_) {
    for (size_t i = 0; i < n_; ++i) corrected_[i] = grad[i] + residual_[i];
    g = corrected_.data();
  }
  switch (dtype_) {
    case pstrain::FLOAT16:
    case pstrain::BFLOAT16:
      // Beyond the range: infinity, which the shard refuses (nonfinite policy).
      (void)EncodeHalves(dtype_, g, n_, words);
      return;
    case pstrain::TOP_K: {
      const size_t k = std::min(k_, n_);
      order_.resize(n_);
      for (size_t i = 0; i < n_; ++i) order_[i] = static_cast<uint32_t>(i);
      // The k largest magnitudes (ties: the lower index), then by index.
      std::nth_element(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k),
                       order_.end(), [&](uint32_t a, uint32_t b) {
                         const float x = std::abs(g[a]), y = std::abs(g[b]);
                         return x > y || (x == y && a < b);
                       });
      std::sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k));
      words->assign(1 + 2 * k, 0.f);
      PutWord(words, 0, static_cast<uint32_t>(k));
      for (size_t j = 0; j < k; ++j) {
        PutWord(words, 1 + j, order_[j]);
        (*words)[1 + k + j] = g[order_[j]];
      }
      if (feedback_) {
        for (size_t i = 0; i < n_; ++i) residual_[i] = g[i];
        for (size_t j = 0; j < k; ++j) residual_[order_[j]] = 0.f;
      }
      return;
    }
    case pstrain::SIGN_SCALED: {
      double l1 = 0;
      for (size_t i = 0; i < n_; ++i) l1 += std::abs(g[i]);
      const float scale = n_ > 0 ? static_cast<float>(l1 / static_cast<double>(n_)) : 0.f;
      words->assign(1 + (n_ + 31) / 32, 0.f);
      (*words)[0] = scale;
      for (size_t i = 0; i < n_; ++i) {
        if (g[i] >= 0) {
          uint32_t w;
          std::memcpy(&w, words->data() + 1 + i / 32, 4);
          PutWord(words, 1 + i / 32, w | (1u << (i % 32)));
        }
      }
      if (feedback_) {
        for (size_t i = 0; i < n_; ++i) residual_[i] = g[i] - (g[i] >= 0 ? scale : -scale);
      }
      return;
    }
    default:
      PSTRAIN_CHECK_MSG(false, "GradientEncoder of an uncompressed dtype");
  }
}

}  // namespace pstrain::transport

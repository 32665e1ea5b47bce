// Rng: a seeded random source (mt19937) with the distributions the fillers,
// dropout and data transforms need. One per user (net, layer, data reader);
// never shared between threads.
#pragma once

#include <cstdint>
#include <random>

namespace pstrain {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(static_cast<std::mt19937::result_type>(seed ^ (seed >> 32))) {}

  float Uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(engine_); }
  float Gaussian(float mean, float stddev) {
    return std::normal_distribution<float>(mean, stddev)(engine_);
  }
  bool Bernoulli(float p) { return std::bernoulli_distribution(p)(engine_); }
  // Uniform integer in [0, n). REQUIRES: n > 0.
  uint32_t Below(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(engine_); }
  std::mt19937& engine() { return engine_; }

 private:
  std::mt19937 engine_;
};

// Derives a child seed from a parent seed and a salt (layer index, rank, ...).
inline uint64_t MixSeed(uint64_t seed, uint64_t salt) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (salt + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace pstrain

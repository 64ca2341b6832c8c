// The random streams of `tessel generate graph`, in memory (storage/generator.h) and chunked
// (storage/chunked_generator.h): xoshiro256** seeded through splitmix64, one stream per purpose.
// Thread safety: an Rng is a plain value; the functions are pure.
#pragma once

#include <cmath>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace tessel::storage {

inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman & Vigna). One independent stream per purpose, so that changing one part of
// the generator does not reshuffle the others.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) {
    uint64_t sm = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (auto& word : s_) word = SplitMix64(&sm);
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n) (Lemire's multiply-shift; the bias is below 2^-32 for n < 2^32 and irrelevant here).
  int64_t Below(int64_t n) {
    return static_cast<int64_t>((static_cast<__uint128_t>(Next()) * static_cast<uint64_t>(n)) >> 64);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Standard normal pairs by Box-Muller.
  std::pair<double, double> NormalPair() {
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    return {r * std::cos(2.0 * M_PI * u2), r * std::sin(2.0 * M_PI * u2)};
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

enum Stream : uint64_t { kClasses = 1, kPermutations, kMeans, kFeatures, kSplits, kEdges };

inline void FillNormal(Rng& rng, double scale, float* out, size_t n) {
  size_t i = 0;
  for (; i + 1 < n; i += 2) {
    auto [a, b] = rng.NormalPair();
    out[i] = static_cast<float>(a * scale);
    out[i + 1] = static_cast<float>(b * scale);
  }
  if (i < n) out[i] = static_cast<float>(rng.NormalPair().first * scale);
}

inline std::vector<int32_t> RandomPermutation(Rng& rng, int32_t n) {
  std::vector<int32_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  while (true) {
    for (int32_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.Below(i + 1)]);
    bool identity = true;
    for (int32_t i = 0; i < n; ++i) identity = identity && perm[i] == i;
    if (!identity || n < 2) return perm;
  }
}

}  // namespace tessel::storage

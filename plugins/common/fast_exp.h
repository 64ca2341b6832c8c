// e^x in float without a call: Cephes expf (x = k ln2 + r with |r| <= ln2 / 2, e^r by a polynomial, 2^k
// put into the exponent bits), branch-free so that loops of it vectorise, within about 2 ulp, clamped to
// the normal range. Double stays std::exp. Include it only in code built with -fno-math-errno.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace tessel::kernels {

inline __attribute__((always_inline)) float FastExp(float x) {
  x = std::min(std::max(x, -87.33654f), 88.37626f);
  const float k = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round(x / ln2)
  const float r = (x - k * 0.693359375f) - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * (r * r) + r + 1.0f;
  return std::bit_cast<float>(std::bit_cast<int32_t>(er) + static_cast<int32_t>(k) * (1 << 23));
}
inline __attribute__((always_inline)) double FastExp(double x) { return std::exp(x); }

}  // namespace tessel::kernels

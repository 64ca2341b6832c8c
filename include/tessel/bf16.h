/* bfloat16 for C++ kernels and hosts (ABI 1.1's TESSEL_DTYPE_BF16): the upper 16 bits of an IEEE f32,
 * stored as they are. Converting to float is exact; converting from float rounds to the nearest
 * bfloat16, ties to even (as __float2bfloat16 and PyTorch do), and keeps a NaN a NaN. Usable in CUDA
 * device code too (the functions are __host__ __device__ under nvcc), so a CPU kernel and a CUDA kernel
 * round the same way.
 */
#ifndef TESSEL_BF16_H_
#define TESSEL_BF16_H_

#ifdef __cplusplus

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TESSEL_HOST_DEVICE __host__ __device__
#else
#define TESSEL_HOST_DEVICE
#endif

namespace tessel {

struct Bf16 {
  uint16_t bits;
};

TESSEL_HOST_DEVICE inline float ToFloat(Bf16 x) {
  const uint32_t u = static_cast<uint32_t>(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TESSEL_HOST_DEVICE inline Bf16 ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return Bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};  // a NaN stays a (quiet) NaN
  }
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return Bf16{static_cast<uint16_t>(u >> 16)};
}

/* f rounded to bfloat16 and back: the value a bf16 store keeps. */
TESSEL_HOST_DEVICE inline float RoundToBf16(float f) { return ToFloat(ToBf16(f)); }

}  // namespace tessel

#endif /* __cplusplus */

#endif /* TESSEL_BF16_H_ */

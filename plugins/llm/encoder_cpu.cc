// llm.encoder.fwd/.bwd on CPU. The forward adds two gathered rows per position, in row chunks. The
// backward splits the columns of C into fixed chunks: each task walks every position in order for its
// columns, so every element of dwte and dwpe is summed in (b, t) order, race-free and bit-identical for
// any number of threads. Under bf16 the sums are f32 (the gradients are A = f32) and the forward rounds
// each output once. Arguments and the token checks: encoder_args.h.
#include <algorithm>

#include "encoder_args.h"

namespace tessel::kernels::llm {
namespace {

// Elements (rows x C) per task of the forward.
constexpr int64_t kElementGrain = 1 << 14;
// Columns per task of the backward: 4 cache lines of float.
constexpr int64_t kColumnChunk = 64;

struct EncoderFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const EncoderFwdArgs<T>& a) {
    const int64_t c = a.c, b = a.b, s = a.s;
    const T* wte = a.wte;
    const T* wpe = a.wpe;
    const int32_t* tokens = a.tokens;
    T* y = a.y;
    args.ParallelFor(b * s, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, c)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* te = wte + tokens[r] * c;
        const T* pe = wpe + (r % s) * c;
        T* out = y + r * c;
        for (int64_t j = 0; j < c; ++j) out[j] = FromAccumulate<T>(ToAccumulate(te[j]) + ToAccumulate(pe[j]));
      }
    });
  }
};

struct EncoderBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const EncoderBwdArgs<T>& a) {
    const int64_t b = a.b, s = a.s, c = a.c;
    const T* dy = a.dy;
    const int32_t* tokens = a.tokens;
    Accumulate<T>* dwte = a.dwte;
    Accumulate<T>* dwpe = a.dwpe;
    const int64_t n = b * s, chunks = (c + kColumnChunk - 1) / kColumnChunk;
    args.ParallelFor(n > 0 ? chunks : 0, 1, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        const int64_t j0 = k * kColumnChunk, width = std::min(kColumnChunk, c - j0);
        for (int64_t r = 0; r < n; ++r) {
          const T* g = dy + r * c + j0;
          Accumulate<T>* te = dwte + tokens[r] * c + j0;
          Accumulate<T>* pe = dwpe + (r % s) * c + j0;
          for (int64_t j = 0; j < width; ++j) te[j] += ToAccumulate(g[j]);
          for (int64_t j = 0; j < width; ++j) pe[j] += ToAccumulate(g[j]);
        }
      }
    });
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL_BF16(EncoderFwdCpu, EncoderFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL_BF16(EncoderBwdCpu, EncoderBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::llm

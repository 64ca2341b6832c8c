// llm.encoder.fwd/.bwd on CPU. The forward adds two gathered rows per position, in row chunks. The
// backward splits the columns of C into fixed chunks: each task walks every position in order for its
// columns, so every element of dwte and dwpe is summed in (b, t) order, race-free and bit-identical for
// any number of threads.
#include <algorithm>

#include "kernels.h"

namespace tessel::kernels::llm {
namespace {

// Elements (rows x C) per task of the forward.
constexpr int64_t kElementGrain = 1 << 14;
// Columns per task of the backward: 4 cache lines of float.
constexpr int64_t kColumnChunk = 64;

struct EncoderFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_llm_encoder_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t v = kUnbound, c = kUnbound, p = kUnbound, b = kUnbound, s = kUnbound;
    const T* wte = args.In<T>(0, "wte", {&v, &c});
    const T* wpe = args.In<T>(1, "wpe", {&p, &c});
    const int32_t* tokens = args.In<int32_t>(2, "tokens", {&b, &s});
    T* y = args.Out<T>(0, "Y", {&b, &s, &c});
    CheckPositions(args, s, p);
    CheckTokens(args, tokens, b, s, v);
    args.ParallelFor(b * s, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, c)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* te = wte + tokens[r] * c;
        const T* pe = wpe + (r % s) * c;
        T* out = y + r * c;
        for (int64_t j = 0; j < c; ++j) out[j] = te[j] + pe[j];
      }
    });
  }
};

struct EncoderBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_llm_encoder_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t b = kUnbound, s = kUnbound, c = kUnbound, v = kUnbound, p = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&b, &s, &c});
    const int32_t* tokens = args.In<int32_t>(1, "tokens", {&b, &s});
    T* dwte = args.Out<T>(0, "dwte", {&v, &c});
    T* dwpe = args.Out<T>(1, "dwpe", {&p, &c});
    CheckPositions(args, s, p);
    CheckTokens(args, tokens, b, s, v);
    const int64_t n = b * s, chunks = (c + kColumnChunk - 1) / kColumnChunk;
    args.ParallelFor(n > 0 ? chunks : 0, 1, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        const int64_t j0 = k * kColumnChunk, width = std::min(kColumnChunk, c - j0);
        for (int64_t r = 0; r < n; ++r) {
          const T* g = dy + r * c + j0;
          T* te = dwte + tokens[r] * c + j0;
          T* pe = dwpe + (r % s) * c + j0;
          for (int64_t j = 0; j < width; ++j) te[j] += g[j];
          for (int64_t j = 0; j < width; ++j) pe[j] += g[j];
        }
      }
    });
  }
};

}  // namespace

TESSEL_DEFINE_UNBOUND_KERNEL(EncoderFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(EncoderBwdCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::llm

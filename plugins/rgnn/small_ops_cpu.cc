// rgnn.typed_gate.fwd/.bwd and rgnn.block_diag.fwd/.bwd on CPU: row loops on the host's pool. The
// gate's dskip is summed per fixed block of rows (the blocks depend on N and D only, never on the
// threads), then over the blocks in order, so it is deterministic. Arguments and the node-type checks:
// small_ops_args.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "small_ops_args.h"

namespace tessel::kernels::rgnn {
namespace {

// Elements per task for the row loops.
constexpr int64_t kElementGrain = 1 << 14;
// At most this many fixed row blocks (each with G partial sums) for the gate's dskip.
constexpr int64_t kMaxGateBlocks = 64;

int64_t RowGrain(int64_t d) { return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, d)); }

// sigmoid(skip[t]) for every type t.
template <typename T>
std::vector<T> Gates(const T* skip, int64_t g) {
  std::vector<T> gate(static_cast<size_t>(g));
  for (int64_t t = 0; t < g; ++t) gate[t] = T(1) / (T(1) + std::exp(-skip[t]));
  return gate;
}

struct TypedGateFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedGateFwdArgs<T>& a) {
    const int64_t n = a.n, d = a.d;
    const T* o = a.o;
    const T* x = a.x;
    const int32_t* node_type = a.node_type;
    T* y = a.y;
    const std::vector<T> gate = Gates(a.skip, a.g);
    args.ParallelFor(n, RowGrain(d), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const T b = gate[node_type[i]], a = T(1) - b;
        const T* o_i = o + i * d;
        const T* x_i = x + i * d;
        T* y_i = y + i * d;
        for (int64_t c = 0; c < d; ++c) y_i[c] = b * o_i[c] + a * x_i[c];
      }
    });
  }
};

struct TypedGateBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedGateBwdArgs<T>& a) {
    const int64_t n = a.n, d = a.d, g = a.g;
    const T* dy = a.dy;
    const T* o = a.o;
    const T* x = a.x;
    const int32_t* node_type = a.node_type;
    T* d_o = a.d_o;
    T* dx = a.dx;
    const std::vector<T> gate = Gates(a.skip, g);

    // Fixed blocks of rows; block k sums sum_c dY (O - X) per type into partial[k * g + t].
    const int64_t blocks = std::max<int64_t>(1, std::min(kMaxGateBlocks, (n + RowGrain(d) - 1) / RowGrain(d)));
    const int64_t block_rows = (n + blocks - 1) / blocks;
    std::vector<double> partial(static_cast<size_t>(blocks * g), 0.0);
    args.ParallelFor(blocks, 1, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        double* part = partial.data() + k * g;
        const int64_t end = std::min(n, (k + 1) * block_rows);
        for (int64_t i = k * block_rows; i < end; ++i) {
          const int32_t t = node_type[i];
          const T b = gate[t], a = T(1) - b;
          const T* dy_i = dy + i * d;
          const T* o_i = o + i * d;
          const T* x_i = x + i * d;
          T* do_i = d_o + i * d;
          T* dx_i = dx + i * d;
          double row = 0;
          for (int64_t c = 0; c < d; ++c) {
            do_i[c] = b * dy_i[c];
            dx_i[c] = a * dy_i[c];
            row += static_cast<double>(dy_i[c]) * (static_cast<double>(o_i[c]) - static_cast<double>(x_i[c]));
          }
          part[t] += row;
        }
      }
    });
    for (int64_t t = 0; t < g; ++t) {
      double sum = 0;
      for (int64_t k = 0; k < blocks; ++k) sum += partial[static_cast<size_t>(k * g + t)];
      const double b = static_cast<double>(gate[t]);
      a.dskip[t] = static_cast<T>(sum * b * (1 - b));
    }
  }
};

struct BlockDiagFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const BlockDiagFwdArgs<T>& a) {
    const int64_t r = a.shape.r, b = a.shape.b, p = a.shape.p, q = a.shape.q, k = a.shape.k, d = a.shape.d;
    const T* blocks = a.blocks;
    T* w = a.w;
    // Row (rel, row) of W: zero but for block row / P, which holds row row % P of that block.
    args.ParallelFor(r * k, RowGrain(d), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t rel = i / k, row = i % k, blk = row / p;
        T* w_i = w + i * d;
        std::fill_n(w_i, d, T(0));
        std::copy_n(blocks + ((rel * b + blk) * p + row % p) * q, q, w_i + blk * q);
      }
    });
  }
};

struct BlockDiagBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const BlockDiagBwdArgs<T>& a) {
    const int64_t r = a.shape.r, k = a.shape.k, d = a.shape.d, b = a.shape.b, p = a.shape.p, q = a.shape.q;
    const T* dw = a.dw;
    T* dblocks = a.dblocks;
    // Row (rel, blk, row) of dblocks is the piece of row blk * P + row of dW[rel] at columns blk * Q.
    args.ParallelFor(r * b * p, RowGrain(q), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t row = i % p, blk = (i / p) % b, rel = i / (p * b);
        std::copy_n(dw + (rel * k + blk * p + row) * d + blk * q, q, dblocks + i * q);
      }
    });
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(TypedGateFwdCpu, TypedGateFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(TypedGateBwdCpu, TypedGateBwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(BlockDiagFwdCpu, BlockDiagFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(BlockDiagBwdCpu, BlockDiagBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn

// rgnn.typed_gate.fwd/.bwd and rgnn.block_diag.fwd/.bwd on CPU: row loops on the host's pool. The
// gate's dskip is summed per fixed block of rows (the blocks depend on N and D only, never on the
// threads), then over the blocks in order, so it is deterministic.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels.h"

namespace tessel::kernels::rgnn {
namespace {

// Elements per task for the row loops.
constexpr int64_t kElementGrain = 1 << 14;
// At most this many fixed row blocks (each with G partial sums) for the gate's dskip.
constexpr int64_t kMaxGateBlocks = 64;

int64_t RowGrain(int64_t d) { return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, d)); }

void CheckNodeTypes(const int32_t* node_type, int64_t n, int64_t g) {
  for (int64_t i = 0; i < n; ++i) {
    if (node_type[i] < 0 || node_type[i] >= g) {
      Fail(TESSEL_STATUS_BAD_DATA, "node_type[" + std::to_string(i) + "] = " + std::to_string(node_type[i]) +
                                       " is out of range [0, " + std::to_string(g) + ")");
    }
  }
}

// sigmoid(skip[t]) for every type t.
template <typename T>
std::vector<T> Gates(const T* skip, int64_t g) {
  std::vector<T> gate(static_cast<size_t>(g));
  for (int64_t t = 0; t < g; ++t) gate[t] = T(1) / (T(1) + std::exp(-skip[t]));
  return gate;
}

struct TypedGateFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_gate_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound, g = kUnbound;
    const T* o = args.In<T>(0, "O", {&n, &d});
    const T* x = args.In<T>(1, "X", {&n, &d});
    const T* skip = args.In<T>(2, "skip", {&g});
    const int32_t* node_type = args.In<int32_t>(3, "node_type", {&n});
    T* y = args.Out<T>(0, "Y", {&n, &d});
    CheckNodeTypes(node_type, n, g);
    const std::vector<T> gate = Gates(skip, g);
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
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_gate_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, d = kUnbound, g = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&n, &d});
    const T* o = args.In<T>(1, "O", {&n, &d});
    const T* x = args.In<T>(2, "X", {&n, &d});
    const T* skip = args.In<T>(3, "skip", {&g});
    const int32_t* node_type = args.In<int32_t>(4, "node_type", {&n});
    T* d_o = args.Out<T>(0, "dO", {&n, &d});
    T* dx = args.Out<T>(1, "dX", {&n, &d});
    T* dskip = args.Out<T>(2, "dskip", {&g});
    CheckNodeTypes(node_type, n, g);
    const std::vector<T> gate = Gates(skip, g);

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
      dskip[t] = static_cast<T>(sum * b * (1 - b));
    }
  }
};

// K == B*P and D == B*Q, else an invalid-argument error naming both shapes.
void CheckBlockShapes(const char* op, int64_t r, int64_t b, int64_t p, int64_t q, int64_t k, int64_t d) {
  if (k != b * p || d != b * q) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         std::string(op) + ": W has shape [" + std::to_string(r) + ", " + std::to_string(k) + ", " + std::to_string(d) +
             "], but blocks of shape [R, B, P, Q] = [" + std::to_string(r) + ", " + std::to_string(b) + ", " +
             std::to_string(p) + ", " + std::to_string(q) + "] need [R, B*P, B*Q] = [" + std::to_string(r) + ", " +
             std::to_string(b * p) + ", " + std::to_string(b * q) + "]");
  }
}

struct BlockDiagFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_block_diag_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t r = kUnbound, b = kUnbound, p = kUnbound, q = kUnbound, k = kUnbound, d = kUnbound;
    const T* blocks = args.In<T>(0, "blocks", {&r, &b, &p, &q});
    T* w = args.Out<T>(0, "W", {&r, &k, &d});
    CheckBlockShapes("rgnn.block_diag.fwd", r, b, p, q, k, d);
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
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_block_diag_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t r = kUnbound, k = kUnbound, d = kUnbound, b = kUnbound, p = kUnbound, q = kUnbound;
    const T* dw = args.In<T>(0, "dW", {&r, &k, &d});
    T* dblocks = args.Out<T>(0, "dblocks", {&r, &b, &p, &q});
    CheckBlockShapes("rgnn.block_diag.bwd", r, b, p, q, k, d);
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

TESSEL_DEFINE_UNBOUND_KERNEL(TypedGateFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(TypedGateBwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(BlockDiagFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(BlockDiagBwdCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn

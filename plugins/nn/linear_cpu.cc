// nn.linear.fwd/.bwd on CPU (W is [O, K], out-major): every product goes to OpenBLAS, one single-threaded
// GEMM per block on the host's pool. The blocks are a function of the shape only, never of the threads,
// and each output element is written by exactly one block, so the result is the same bits at any thread
// count without partial buffers:
//   forward   row blocks of Y, each filled with the bias, then one GEMM with beta = 1 (Y = X W^T + b);
//   backward  row blocks of dX = dY W, and blocks of 64 rows of dW += dY^T X (beta = 1), each with the
//             same columns of db += the column sums of dY, rows in order. Both kinds of block go to one
//             ParallelFor, the large dW blocks first, so the pool balances them together.
#include <algorithm>
#include <string>

#include "blas.h"
#include "kernels.h"

namespace tessel::kernels::nn {
namespace {

// Rows of X (Y, dY, dX) per block. The GEMM of a block re-packs the whole weight operand, so a block
// must be tall enough to pay for that, and short enough to leave a 2- to 4-thread pool some blocks to
// balance on a GPT-sized batch (N = 1024..8192 rows).
constexpr int64_t kRowBlock = 256;
// Rows of dW (columns of dY) per block of the weight gradient: each block re-packs all of X, the same
// trade-off along O. 64 leaves 4 blocks at O = 256, where 128 left 2 that could not balance 3 threads;
// at 2 threads the two measured alike within this machine's noise (nn_kernels_bench).
constexpr int64_t kOutBlock = 64;

int64_t Blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }

struct LinearFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_nn_linear_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, k = kUnbound, o = kUnbound;
    const T* x = args.In<T>(0, "X", {&n, &k});
    const T* w = args.In<T>(1, "W", {&o, &k});
    const T* b = args.In<T>(2, "b", {&o});
    T* y = args.Out<T>(0, "Y", {&n, &o});
    args.ParallelFor(Blocks(n, kRowBlock), 1, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t i0 = blk * kRowBlock, rows = std::min(kRowBlock, n - i0);
        for (int64_t i = i0; i < i0 + rows; ++i) std::copy_n(b, o, y + i * o);
        Gemm<T>(Trans::kNo, Trans::kYes, rows, o, k, T(1), x + i0 * k, k, w, k, T(1), y + i0 * o, o);
      }
    });
  }
};

// db[o0, o1) += the column sums of dY's columns o0..o1, each summed over the rows in order.
template <typename T>
void AddColumnSums(const T* dy, int64_t n, int64_t o, int64_t o0, int64_t o1, T* db) {
  T acc[kOutBlock] = {};
  const int64_t width = o1 - o0;
  for (int64_t i = 0; i < n; ++i) {
    const T* row = dy + i * o + o0;
    for (int64_t c = 0; c < width; ++c) acc[c] += row[c];
  }
  for (int64_t c = 0; c < width; ++c) db[o0 + c] += acc[c];
}

struct LinearBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_nn_linear_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, k = kUnbound, o = kUnbound, dx_rows = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&n, &o});
    const T* x = args.In<T>(1, "X", {&n, &k});
    const T* w = args.In<T>(2, "W", {&o, &k});
    T* dx = args.Out<T>(0, "dX", {&dx_rows, &k});
    T* dw = args.Out<T>(1, "dW", {&o, &k});
    T* db = args.Out<T>(2, "db", {&o});
    const int64_t dw_blocks = Blocks(o, kOutBlock);
    const int64_t dx_blocks = LinearBwdWantsDx(dx_rows, n) ? Blocks(n, kRowBlock) : 0;
    // The weight-gradient blocks (the larger: all N rows deep) first, so that the pool's last chunks
    // are the small dX blocks that even out the threads.
    args.ParallelFor(dw_blocks + dx_blocks, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        if (t < dw_blocks) {
          const int64_t o0 = t * kOutBlock, cols = std::min(kOutBlock, o - o0);
          Gemm<T>(Trans::kYes, Trans::kNo, cols, k, n, T(1), dy + o0, o, x, k, T(1), dw + o0 * k, k);
          AddColumnSums(dy, n, o, o0, o0 + cols, db);
        } else {
          const int64_t i0 = (t - dw_blocks) * kRowBlock, rows = std::min(kRowBlock, n - i0);
          Gemm<T>(Trans::kNo, Trans::kNo, rows, k, o, T(1), dy + i0 * o, o, w, k, T(0), dx + i0 * k, k);
        }
      }
    });
  }
};

}  // namespace

bool LinearBwdWantsDx(int64_t dx_rows, int64_t n) {
  if (dx_rows != 0 && dx_rows != n) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, "output 'dX' must have 0 rows (skip) or as many as dY (" + std::to_string(n) +
                                             "), has " + std::to_string(dx_rows));
  }
  return dx_rows > 0;
}

TESSEL_DEFINE_KERNEL(LinearFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(LinearBwdCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn

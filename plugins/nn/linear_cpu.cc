// nn.linear.fwd/.bwd on CPU (W is [O, K], out-major): every product goes to OpenBLAS, one single-threaded
// GEMM per block on the host's pool. The blocks are a function of the shape only, never of the threads,
// and each output element is written by exactly one block, so the result is the same bits at any thread
// count without partial buffers:
//   forward   row blocks of Y, each filled with the bias, then one GEMM with beta = 1 (Y = X W^T + b);
//   backward  row blocks of dX = dY W, and blocks of 64 rows of dW += dY^T X (beta = 1), each with the
//             same columns of db += the column sums of dY, rows in order. Both kinds of block go to one
//             ParallelFor, the large dW blocks first, so the pool balances them together.
// Arguments: linear_args.h.
#include <algorithm>

#include "blas.h"
#include "linear_args.h"

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
  template <typename T>
  static void Run(const KernelArgs& args, const LinearFwdArgs<T>& a) {
    const int64_t n = a.n, k = a.k, o = a.o;
    const T* x = a.x;
    const T* w = a.w;
    const T* b = a.b;
    T* y = a.y;
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
  template <typename T>
  static void Run(const KernelArgs& args, const LinearBwdArgs<T>& a) {
    const int64_t n = a.n, k = a.k, o = a.o;
    const T* dy = a.dy;
    const T* x = a.x;
    const T* w = a.w;
    T* dx = a.dx;
    T* dw = a.dw;
    T* db = a.db;
    const int64_t dw_blocks = Blocks(o, kOutBlock);
    const int64_t dx_blocks = a.want_dx ? Blocks(n, kRowBlock) : 0;
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

TESSEL_DEFINE_KERNEL(LinearFwdCpu, LinearFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(LinearBwdCpu, LinearBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn

// nn.linear.fwd/.bwd on CPU (W is [O, K], out-major): every product goes to OpenBLAS, one single-threaded
// GEMM per block on the host's pool. The blocks are a function of the shape only, never of the threads,
// and each output element is written by exactly one block, so the result is the same bits at any thread
// count without partial buffers:
//   forward   row blocks of Y, each filled with the bias, then one GEMM with beta = 1 (Y = X W^T + b);
//   backward  row blocks of dX = dY W, and blocks of 64 rows of dW += dY^T X (beta = 1), each with the
//             same columns of db += the column sums of dY, rows in order. Both kinds of block go to one
//             ParallelFor, the large dW blocks first, so the pool balances them together.
// Under bf16 the same blocks run in f32 (OpenBLAS has no bf16 GEMM here): the weights (and X for dW)
// widened once per call, each block's rows of X or dY widened as it starts, Y = X W^T + b and dX rounded
// to bf16 once, dW and db (f32, A) accumulated in f32 as cuBLAS's f32-compute GEMMs do. It is the
// reference of the GPU's bf16 path, not a fast path.
// nn.linear_gelu_tanh.fwd is the forward, then gelu_cpu.cc's tanh GELU. Arguments: linear_args.h.
#include <algorithm>
#include <vector>

#include "blas.h"
#include "linear_args.h"
#include "linear_gelu.h"
#include "widen.h"

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

// `count` values of `x` widened into `f`, on the pool.
void WidenAll(const KernelArgs& args, const Bf16* x, int64_t count, float* f) {
  args.ParallelFor(count, 1 << 15, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) f[i] = ToFloat(x[i]);
  });
}

void LinearFwdBf16(const KernelArgs& args, const LinearFwdArgs<Bf16>& a) {
  const int64_t n = a.n, k = a.k, o = a.o;
  const Workspace<float> w(args, o * k);
  WidenAll(args, a.w, o * k, w.get());
  std::vector<float> bias(static_cast<size_t>(o));
  for (int64_t j = 0; j < o; ++j) bias[static_cast<size_t>(j)] = ToFloat(a.b[j]);
  args.ParallelFor(Blocks(n, kRowBlock), 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> x(static_cast<size_t>(kRowBlock * k)), y(static_cast<size_t>(kRowBlock * o));
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t i0 = blk * kRowBlock, rows = std::min(kRowBlock, n - i0);
      Widened(a.x + i0 * k, rows * k, x.data());
      for (int64_t i = 0; i < rows; ++i) std::copy(bias.begin(), bias.end(), y.begin() + i * o);
      Gemm<float>(Trans::kNo, Trans::kYes, rows, o, k, 1.f, x.data(), k, w.get(), k, 1.f, y.data(), o);
      Store<Bf16>(y.data(), rows * o, a.y + i0 * o);
    }
  });
}

struct LinearFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const LinearFwdArgs<T>& a) {
    if constexpr (kWidened<T>) {
      LinearFwdBf16(args, a);
      return;
    } else {
      RunFloat(args, a);
    }
  }
  template <typename T>
  static void RunFloat(const KernelArgs& args, const LinearFwdArgs<T>& a) {
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

// nn.linear_gelu_tanh.fwd: the linear forward into Pre, then the GELU of Pre into Y, as the two ops compute
// them (so a GPT block gives the same bits whether it calls the fused op or the pair).
struct LinearGeluTanhFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const LinearGeluTanhFwdArgs<T>& a) {
    LinearFwdCpu::Run(args, a.linear);
    GeluTanhForwardCpu(args, a.linear.y, a.linear.n * a.linear.o, a.y);
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

void LinearBwdBf16(const KernelArgs& args, const LinearBwdArgs<Bf16>& a) {
  const int64_t n = a.n, k = a.k, o = a.o;
  const Workspace<float> x(args, n * k), w(args, a.want_dx ? o * k : 0);
  WidenAll(args, a.x, n * k, x.get());
  if (a.want_dx) WidenAll(args, a.w, o * k, w.get());
  const int64_t dw_blocks = Blocks(o, kOutBlock);
  const int64_t dx_blocks = a.want_dx ? Blocks(n, kRowBlock) : 0;
  args.ParallelFor(dw_blocks + dx_blocks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> dy, out;
    for (int64_t t = t0; t < t1; ++t) {
      if (t < dw_blocks) {
        // dY's columns [o0, o0 + cols), all N rows, as an [N, cols] block.
        const int64_t o0 = t * kOutBlock, cols = std::min(kOutBlock, o - o0);
        dy.resize(static_cast<size_t>(n * cols));
        for (int64_t i = 0; i < n; ++i) Widened(a.dy + i * o + o0, cols, dy.data() + i * cols);
        Gemm<float>(Trans::kYes, Trans::kNo, cols, k, n, 1.f, dy.data(), cols, x.get(), k, 1.f, a.dw + o0 * k, k);
        if (a.db != nullptr) AddColumnSums(dy.data(), n, cols, 0, cols, a.db + o0);
      } else {
        const int64_t i0 = (t - dw_blocks) * kRowBlock, rows = std::min(kRowBlock, n - i0);
        dy.resize(static_cast<size_t>(rows * o));
        out.resize(static_cast<size_t>(rows * k));
        Widened(a.dy + i0 * o, rows * o, dy.data());
        Gemm<float>(Trans::kNo, Trans::kNo, rows, k, o, 1.f, dy.data(), o, w.get(), k, 0.f, out.data(), k);
        Store<Bf16>(out.data(), rows * k, a.dx + i0 * k);
      }
    }
  });
}

struct LinearBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const LinearBwdArgs<T>& a) {
    if constexpr (kWidened<T>) {
      LinearBwdBf16(args, a);
      return;
    } else {
      RunFloat(args, a);
    }
  }
  template <typename T>
  static void RunFloat(const KernelArgs& args, const LinearBwdArgs<T>& a) {
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
          if (db != nullptr) AddColumnSums(dy, n, o, o0, o0 + cols, db);
        } else {
          const int64_t i0 = (t - dw_blocks) * kRowBlock, rows = std::min(kRowBlock, n - i0);
          Gemm<T>(Trans::kNo, Trans::kNo, rows, k, o, T(1), dy + i0 * o, o, w, k, T(0), dx + i0 * k, k);
        }
      }
    });
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL_BF16(LinearFwdCpu, LinearFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL_BF16(LinearBwdCpu, LinearBwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL_BF16(LinearGeluTanhFwdCpu, LinearGeluTanhFwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn

// llm.layernorm.fwd/.bwd on CPU, one row at a time with the row in cache (row_math.h). The backward's
// parameter gradients are summed in fixed blocks of rows: each block's partial sums go to their own
// buffer, then the blocks are added in order, so dw and db do not depend on the number of threads.
// Under bf16 (widen.h) each row is widened to f32, normalised there, and Y and dX are rounded once; the
// statistics and dw, db are f32 (A). Arguments: layernorm_args.h.
#include <algorithm>

#include "layernorm_args.h"
#include "row_math.h"
#include "widen.h"

namespace tessel::kernels::llm {
namespace {

// Elements (rows x C) per task of the forward.
constexpr int64_t kElementGrain = 1 << 14;
// Rows per partial sum of dw and db in the backward: a fixed number, never derived from the threads.
constexpr int64_t kBlockRows = 32;
// Columns per task of the final reduction of the partial sums.
constexpr int64_t kColumnChunk = 256;

struct LayernormFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const LayernormFwdArgs<T>& a) {
    using A = Accumulate<T>;
    const int64_t n = a.n, c = a.c;
    const A eps = a.eps;
    const T* x = a.x;
    T* y = a.y;
    A* mean = a.mean;
    A* rstd = a.rstd;
    std::vector<A> wb = ScratchRow<T>(2 * c);
    const A* w = Widened(a.w, c, wb.data());
    const A* b = Widened(a.b, c, wb.data() + (kWidened<T> ? c : 0));
    args.ParallelFor(n, std::max<int64_t>(1, kElementGrain / c), [&](int64_t r0, int64_t r1) {
      std::vector<A> rows = ScratchRow<T>(2 * c);
      for (int64_t r = r0; r < r1; ++r) {
        A* out = ComputeInto(y + r * c, rows.data() + (kWidened<T> ? c : 0));
        LayernormRow(c, Widened(x + r * c, c, rows.data()), w, b, eps, out, mean + r, rstd + r);
        Store<T>(out, c, y + r * c);
      }
    });
  }
};

// Both backward ops: X and mean, or Y, b and w (then each row's x - mean is rebuilt as (Y - b) / (w rstd)
// into a scratch row, and the same row loop runs).
struct LayernormBackwardCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const LayernormBackwardArgs<T>& a) {
    using A = Accumulate<T>;
    const bool from_output = a.saved == LayernormSaved::kOutput;
    const int64_t n = a.n, c = a.c;
    const T* dy = a.dy;
    const T* x = a.x;
    const A* mean = a.mean;
    const A* rstd = a.rstd;
    T* dx = a.dx;
    A* dw = a.dw;
    A* db = a.db;
    if (n == 0 || c == 0) return;
    std::vector<A> wb = ScratchRow<T>(2 * c);
    const A* w = Widened(a.w, c, wb.data());
    const A* b = from_output ? Widened(a.b, c, wb.data() + (kWidened<T> ? c : 0)) : nullptr;
    // partial[k] = (dw, db) of rows [k * kBlockRows, (k + 1) * kBlockRows): 2C values.
    const int64_t blocks = (n + kBlockRows - 1) / kBlockRows;
    Workspace<A> partial(args, blocks * 2 * c);
    Workspace<A> centred(args, from_output ? blocks * c : 0);
    A* part = partial.get();
    args.ParallelFor(blocks, 1, [&](int64_t k0, int64_t k1) {
      std::vector<A> rows = ScratchRow<T>(3 * c);  // dY, X or Y, dX
      for (int64_t k = k0; k < k1; ++k) {
        A* dw_acc = part + k * 2 * c;
        A* db_acc = dw_acc + c;
        std::fill_n(dw_acc, 2 * c, A(0));
        for (int64_t r = k * kBlockRows; r < std::min(n, (k + 1) * kBlockRows); ++r) {
          const A* g = Widened(dy + r * c, c, rows.data());
          const A* in = Widened(x + r * c, c, rows.data() + (kWidened<T> ? c : 0));
          A* d = WidenedInPlace(dx + r * c, c, rows.data() + (kWidened<T> ? 2 * c : 0));
          if (!from_output) {
            LayernormRowBackward(c, g, in, w, mean[r], rstd[r], d, dw_acc, db_acc);
          } else {
            A* row = centred.get() + k * c;
            for (int64_t j = 0; j < c; ++j) row[j] = (in[j] - b[j]) / (w[j] * rstd[r]);
            LayernormRowBackward(c, g, row, w, A(0), rstd[r], d, dw_acc, db_acc);
          }
          Store<T>(d, c, dx + r * c);
        }
      }
    });
    const int64_t column_chunks = (2 * c + kColumnChunk - 1) / kColumnChunk;
    args.ParallelFor(column_chunks, 1, [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t j0 = q * kColumnChunk, width = std::min(2 * c - j0, kColumnChunk);
        A sum[kColumnChunk] = {};
        for (int64_t k = 0; k < blocks; ++k) {
          const A* block = part + k * 2 * c + j0;
          for (int64_t j = 0; j < width; ++j) sum[j] += block[j];
        }
        for (int64_t j = 0; j < width; ++j) {
          A* out = j0 + j < c ? dw + j0 + j : db + (j0 + j - c);
          *out += sum[j];
        }
      }
    });
  }
};

// The two backward ops, one body.
struct LayernormBwdCpu : LayernormBackwardCpu {};
struct LayernormBwdFromOutputCpu : LayernormBackwardCpu {};

}  // namespace

TESSEL_DEFINE_KERNEL_BF16(LayernormFwdCpu, LayernormFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL_BF16(LayernormBwdCpu, LayernormBwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL_BF16(LayernormBwdFromOutputCpu, LayernormBwdFromOutputArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::llm

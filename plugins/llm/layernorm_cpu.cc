// llm.layernorm.fwd/.bwd on CPU, one row at a time with the row in cache (row_math.h). The backward's
// parameter gradients are summed in fixed blocks of rows: each block's partial sums go to their own
// buffer, then the blocks are added in order, so dw and db do not depend on the number of threads.
// Arguments: layernorm_args.h.
#include <algorithm>

#include "layernorm_args.h"
#include "row_math.h"

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
    const int64_t n = a.n, c = a.c;
    const T eps = a.eps;
    const T* x = a.x;
    const T* w = a.w;
    const T* b = a.b;
    T* y = a.y;
    T* mean = a.mean;
    T* rstd = a.rstd;
    args.ParallelFor(n, std::max<int64_t>(1, kElementGrain / c), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) LayernormRow(c, x + r * c, w, b, eps, y + r * c, mean + r, rstd + r);
    });
  }
};

// Both backward ops: X and mean, or Y, b and w (then each row's x - mean is rebuilt as (Y - b) / (w rstd)
// into a scratch row, and the same row loop runs).
struct LayernormBackwardCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const LayernormBackwardArgs<T>& a) {
    const bool from_output = a.saved == LayernormSaved::kOutput;
    const int64_t n = a.n, c = a.c;
    const T* dy = a.dy;
    const T* x = a.x;
    const T* w = a.w;
    const T* b = a.b;
    const T* mean = a.mean;
    const T* rstd = a.rstd;
    T* dx = a.dx;
    T* dw = a.dw;
    T* db = a.db;
    if (n == 0 || c == 0) return;
    // partial[k] = (dw, db) of rows [k * kBlockRows, (k + 1) * kBlockRows): 2C values.
    const int64_t blocks = (n + kBlockRows - 1) / kBlockRows;
    Workspace<T> partial(args, blocks * 2 * c);
    Workspace<T> centred(args, from_output ? blocks * c : 0);
    T* part = partial.get();
    args.ParallelFor(blocks, 1, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        T* dw_acc = part + k * 2 * c;
        T* db_acc = dw_acc + c;
        std::fill_n(dw_acc, 2 * c, T(0));
        for (int64_t r = k * kBlockRows; r < std::min(n, (k + 1) * kBlockRows); ++r) {
          if (!from_output) {
            LayernormRowBackward(c, dy + r * c, x + r * c, w, mean[r], rstd[r], dx + r * c, dw_acc, db_acc);
            continue;
          }
          T* row = centred.get() + k * c;
          for (int64_t j = 0; j < c; ++j) row[j] = (x[r * c + j] - b[j]) / (w[j] * rstd[r]);
          LayernormRowBackward(c, dy + r * c, row, w, T(0), rstd[r], dx + r * c, dw_acc, db_acc);
        }
      }
    });
    const int64_t column_chunks = (2 * c + kColumnChunk - 1) / kColumnChunk;
    args.ParallelFor(column_chunks, 1, [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t j0 = q * kColumnChunk, width = std::min(2 * c - j0, kColumnChunk);
        T sum[kColumnChunk] = {};
        for (int64_t k = 0; k < blocks; ++k) {
          const T* block = part + k * 2 * c + j0;
          for (int64_t j = 0; j < width; ++j) sum[j] += block[j];
        }
        for (int64_t j = 0; j < width; ++j) {
          T* out = j0 + j < c ? dw + j0 + j : db + (j0 + j - c);
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

TESSEL_DEFINE_KERNEL(LayernormFwdCpu, LayernormFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(LayernormBwdCpu, LayernormBwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(LayernormBwdFromOutputCpu, LayernormBwdFromOutputArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::llm

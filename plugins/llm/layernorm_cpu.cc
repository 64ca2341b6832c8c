// llm.layernorm.fwd/.bwd on CPU, one row at a time with the row in cache (row_math.h). The backward's
// parameter gradients are summed in fixed blocks of rows: each block's partial sums go to their own
// buffer, then the blocks are added in order, so dw and db do not depend on the number of threads.
#include <algorithm>
#include <string>

#include "kernels.h"
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
  static const tessel_op_decl& Decl() { return tessel_op_llm_layernorm_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t n = kUnbound, c = kUnbound;
    const T eps = static_cast<T>(CheckedLayernormEps(args));
    const T* x = args.In<T>(0, "X", {&n, &c});
    const T* w = args.In<T>(1, "w", {&c});
    const T* b = args.In<T>(2, "b", {&c});
    T* y = args.Out<T>(0, "Y", {&n, &c});
    T* mean = args.Out<T>(1, "mean", {&n});
    T* rstd = args.Out<T>(2, "rstd", {&n});
    if (c == 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "llm.layernorm.fwd: C must be >= 1");
    args.ParallelFor(n, std::max<int64_t>(1, kElementGrain / c), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) LayernormRow(c, x + r * c, w, b, eps, y + r * c, mean + r, rstd + r);
    });
  }
};

struct LayernormBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_llm_layernorm_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args);
};

// Both backward ops: X and mean, or Y, b and w (then each row's x - mean is rebuilt as (Y - b) / (w rstd)
// into a scratch row, and the same row loop runs).
template <typename T>
void LayernormBackward(const KernelArgs& args, bool from_output) {
  const char* op = from_output ? "llm.layernorm.bwd_from_output" : "llm.layernorm.bwd";
  int64_t n = kUnbound, c = kUnbound;
  const T* dy = args.In<T>(0, "dY", {&n, &c});
  const T* x = args.In<T>(1, from_output ? "Y" : "X", {&n, &c});
  const T* w = args.In<T>(2, "w", {&c});
  const T* b = from_output ? args.In<T>(3, "b", {&c}) : nullptr;
  const T* mean = from_output ? nullptr : args.In<T>(3, "mean", {&n});
  const T* rstd = args.In<T>(4, "rstd", {&n});
  T* dx = args.Out<T>(0, "dX", {&n, &c});
  T* dw = args.Out<T>(1, "dw", {&c});
  T* db = args.Out<T>(2, "db", {&c});
  if (n == 0 || c == 0) return;
  if (from_output) {
    for (int64_t j = 0; j < c; ++j) {
      if (w[j] == T(0)) Fail(TESSEL_STATUS_INVALID_ARGUMENT, std::string(op) + ": w has a zero: use llm.layernorm.bwd");
    }
  }
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

template <typename T>
void LayernormBwdCpu::Run(const KernelArgs& args) {
  LayernormBackward<T>(args, false);
}

struct LayernormBwdFromOutputCpu {
  static const tessel_op_decl& Decl() { return tessel_op_llm_layernorm_bwd_from_output; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    LayernormBackward<T>(args, true);
  }
};

}  // namespace

TESSEL_DEFINE_UNBOUND_KERNEL(LayernormFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(LayernormBwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(LayernormBwdFromOutputCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::llm

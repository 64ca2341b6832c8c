// rgnn.typed_linear.fwd/.bwd on CPU: gather the rows of each relation, then one GEMM per block of
// rows of a relation (compact materialization: once per unique (relation, source) pair).
#include <algorithm>
#include <vector>

#include "blas.h"
#include "index_checks.h"
#include "kernels.h"

namespace tessel::kernels::rgnn {
namespace {

template <typename T>
void GatherRows(const T* x, int64_t k, const int64_t* rows, int64_t n, T* out) {
  for (int64_t i = 0; i < n; ++i) std::copy_n(x + rows[i] * k, k, out + i * k);
}

template <typename T>
void TypedLinearFwd(const KernelArgs& args) {
  int64_t m = kUnbound, k = kUnbound, r = kUnbound, d = kUnbound, u = kUnbound;
  const T* x = args.In<T>(0, "X", {&m, &k});
  const T* w = args.In<T>(1, "W", {&r, &k, &d});
  int64_t r1 = r + 1;
  const int64_t* uniq_ptr = args.In<int64_t>(2, "uniq_ptr", {&r1});
  const int64_t* uniq_src = args.In<int64_t>(3, "uniq_src", {&u});
  T* y = args.Out<T>(0, "Y", {&u, &d});
  CheckOffsets(uniq_ptr, r, u, "uniq_ptr");
  CheckIndices(uniq_src, u, m, "uniq_src");

  const std::vector<RowBlock> blocks = RelationBlocks(uniq_ptr, r, GemmBlockRows(k, d));
  args.ParallelFor(static_cast<int64_t>(blocks.size()), 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> gathered;
    for (int64_t b = b0; b < b1; ++b) {
      const RowBlock& blk = blocks[b];
      const int64_t n = blk.end - blk.begin;
      gathered.resize(n * k);
      GatherRows(x, k, uniq_src + blk.begin, n, gathered.data());
      Gemm<T>(Trans::kNo, Trans::kNo, n, d, k, T(1), gathered.data(), k, w + blk.relation * k * d, d, T(0),
              y + blk.begin * d, d);
    }
  });
}

// dW[r] = X_r^T dY_r. One relation per task, so each dW[r] has one writer; its row blocks accumulate.
template <typename T>
void WeightGrad(const KernelArgs& args, const T* dy, const T* x, const int64_t* uniq_ptr, const int64_t* uniq_src,
                int64_t r, int64_t k, int64_t d, T* dw) {
  const int64_t block_rows = GemmBlockRows(k, d);
  args.ParallelFor(r, 1, [&](int64_t r0, int64_t r1) {
    std::vector<T> gathered;
    for (int64_t rel = r0; rel < r1; ++rel) {
      T* dw_r = dw + rel * k * d;
      const int64_t p0 = uniq_ptr[rel], p1 = uniq_ptr[rel + 1];
      if (p0 == p1) std::fill_n(dw_r, k * d, T(0));
      for (int64_t begin = p0; begin < p1; begin += block_rows) {
        const int64_t n = std::min(block_rows, p1 - begin);
        gathered.resize(n * k);
        GatherRows(x, k, uniq_src + begin, n, gathered.data());
        Gemm<T>(Trans::kYes, Trans::kNo, k, d, n, T(1), gathered.data(), k, dy + begin * d, d,
                begin == p0 ? T(0) : T(1), dw_r, d);
      }
    }
  });
}

// dX[m] = sum of G[u] over the compact rows u whose source is m, with G = dY_r W_r^T. The rows are
// grouped by source with a stable counting sort, so every dX row has one writer and a fixed sum order.
template <typename T>
void InputGrad(const KernelArgs& args, const T* dy, const T* w, const int64_t* uniq_ptr, const int64_t* uniq_src,
               int64_t m, int64_t r, int64_t k, int64_t d, int64_t u, T* dx) {
  std::vector<T> g(static_cast<size_t>(u * k));
  const std::vector<RowBlock> blocks = RelationBlocks(uniq_ptr, r, GemmBlockRows(k, d));
  args.ParallelFor(static_cast<int64_t>(blocks.size()), 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const RowBlock& blk = blocks[b];
      Gemm<T>(Trans::kNo, Trans::kYes, blk.end - blk.begin, k, d, T(1), dy + blk.begin * d, d, w + blk.relation * k * d,
              d, T(0), g.data() + blk.begin * k, k);
    }
  });
  std::vector<int64_t> src_ptr(static_cast<size_t>(m + 1), 0), order(static_cast<size_t>(u));
  for (int64_t i = 0; i < u; ++i) ++src_ptr[uniq_src[i] + 1];
  for (int64_t i = 0; i < m; ++i) src_ptr[i + 1] += src_ptr[i];
  std::vector<int64_t> cursor(src_ptr.begin(), src_ptr.end() - 1);
  for (int64_t i = 0; i < u; ++i) order[cursor[uniq_src[i]]++] = i;
  args.ParallelFor(m, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k)), [&](int64_t m0, int64_t m1) {
    for (int64_t row = m0; row < m1; ++row) {
      T* out = dx + row * k;
      std::fill_n(out, k, T(0));
      for (int64_t j = src_ptr[row]; j < src_ptr[row + 1]; ++j) {
        const T* gr = g.data() + order[j] * k;
        for (int64_t c = 0; c < k; ++c) out[c] += gr[c];
      }
    }
  });
}

template <typename T>
void TypedLinearBwd(const KernelArgs& args) {
  int64_t u = kUnbound, d = kUnbound, m = kUnbound, k = kUnbound, r = kUnbound;
  const T* dy = args.In<T>(0, "dY", {&u, &d});
  const T* x = args.In<T>(1, "X", {&m, &k});
  const T* w = args.In<T>(2, "W", {&r, &k, &d});
  int64_t r1 = r + 1;
  const int64_t* uniq_ptr = args.In<int64_t>(3, "uniq_ptr", {&r1});
  const int64_t* uniq_src = args.In<int64_t>(4, "uniq_src", {&u});
  int64_t dx_rows = kUnbound;
  T* dx = args.Out<T>(0, "dX", {&dx_rows, &k});
  if (dx_rows != 0 && dx_rows != m) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         "output 'dX' must have 0 rows (skip) or as many as X (" + std::to_string(m) + ")");
  }
  T* dw = args.Out<T>(1, "dW", {&r, &k, &d});
  CheckOffsets(uniq_ptr, r, u, "uniq_ptr");
  CheckIndices(uniq_src, u, m, "uniq_src");
  WeightGrad(args, dy, x, uniq_ptr, uniq_src, r, k, d, dw);
  if (dx_rows > 0) InputGrad(args, dy, w, uniq_ptr, uniq_src, m, r, k, d, u, dx);
}

struct TypedLinearFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_linear_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    TypedLinearFwd<T>(args);
  }
};

struct TypedLinearBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_linear_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    TypedLinearBwd<T>(args);
  }
};

}  // namespace

TESSEL_DEFINE_UNBOUND_KERNEL(TypedLinearFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(TypedLinearBwdCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn

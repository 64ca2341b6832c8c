// rgnn.typed_linear.fwd/.bwd on CPU: gather the rows of each relation, then one GEMM per block of
// rows of a relation (compact materialization: once per unique (relation, source) pair). Arguments and
// the index checks: typed_linear_args.h.
#include <algorithm>
#include <vector>

#include "blas.h"
#include "index_checks.h"
#include "typed_linear_args.h"

namespace tessel::kernels::rgnn {
namespace {

template <typename T>
void GatherRows(const T* x, int64_t k, const int64_t* rows, int64_t n, T* out) {
  for (int64_t i = 0; i < n; ++i) std::copy_n(x + rows[i] * k, k, out + i * k);
}

struct TypedLinearFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedLinearFwdArgs<T>& a) {
    const int64_t k = a.k, r = a.r, d = a.d;
    const T* x = a.x;
    const T* w = a.w;
    const int64_t* uniq_ptr = a.uniq_ptr;
    const int64_t* uniq_src = a.uniq_src;
    T* y = a.y;
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
};

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

struct TypedLinearBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedLinearBwdArgs<T>& a) {
    WeightGrad(args, a.dy, a.x, a.uniq_ptr, a.uniq_src, a.r, a.k, a.d, a.dw);
    if (a.dx != nullptr) InputGrad(args, a.dy, a.w, a.uniq_ptr, a.uniq_src, a.m, a.r, a.k, a.d, a.u, a.dx);
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(TypedLinearFwdCpu, TypedLinearFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(TypedLinearBwdCpu, TypedLinearBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn

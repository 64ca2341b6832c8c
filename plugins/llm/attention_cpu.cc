// llm.attention.fwd/.bwd on CPU: GPT-2's causal multi-head attention, per (sequence b, head h), in blocks
// of kQueryRows queries. A block of queries [i0, i1) only meets keys [0, i1) (the keys above the diagonal
// block are masked out, so their products are never computed). The products go to OpenBLAS, reading q,
// k and v in place from qkv (leading dimension 3C); the softmax runs in row_math.h.
//
// Forward, per block: S = scale Q K^T, P = exp(S - rowmax) masked, lse = rowmax + log(rowsum),
// Y = (P V) / rowsum. Work items are (b, h, block) triples, each writing its own rows of Y and lse.
// Backward, per (b, h), blocks in order: P = exp(scale Q K^T - lse) masked, dP = dY V^T,
// dS = P (dP - D) with D_i = dY_i . Y_i, dQ = scale dS K (written), dK += scale dS^T Q, dV += P^T dY
// (dK and dV start at zero). Work items are (b, h) pairs, each owning its columns of dqkv.
// Every item computes the same way whichever thread runs it, so the results do not depend on the threads.
// Arguments: attention_args.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "attention_args.h"
#include "blas.h"
#include "row_math.h"

namespace tessel::kernels::llm {
namespace {

constexpr int64_t kQueryRows = 64;

struct AttentionFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const AttentionFwdArgs<T>& a);
};

template <typename T>
void AttentionFwdCpu::Run(const KernelArgs& args, const AttentionFwdArgs<T>& a) {
  const int64_t b = a.shape.b, s = a.shape.s, c = a.shape.c, h = a.shape.h, q = a.shape.q;
  const T* qkv = a.qkv;
  T* y = a.y;
  T* lse = a.lse;
  const int64_t hs = a.shape.hs, blocks = (s + kQueryRows - 1) / kQueryRows;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  args.ParallelFor(b * h * blocks, 1, [&](int64_t u0, int64_t u1) {
    std::vector<T> scores(static_cast<size_t>(kQueryRows * s));
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bi = u / (h * blocks), hi = (u / blocks) % h, i0 = (u % blocks) * kQueryRows;
      const int64_t i1 = std::min(s, i0 + kQueryRows), rows = i1 - i0;
      const T* base = qkv + bi * s * q + hi * hs;  // q of (b, 0, head h); k at +c, v at +2c
      T* sc = scores.data();                       // [rows, i1]
      Gemm<T>(Trans::kNo, Trans::kYes, rows, i1, hs, scale, base + i0 * q, q, base + c, q, T(0), sc, i1);
      T* y_rows = y + (bi * s + i0) * c + hi * hs;
      T* lse_rows = lse + (bi * h + hi) * s + i0;
      std::vector<T> inv_sum(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        T* row = sc + r * i1;
        const int64_t keys = i0 + r + 1;
        const T max = RowMax(keys, row);
        const T sum = ExpShiftedSum(keys, max, row);
        std::fill(row + keys, row + i1, T(0));
        lse_rows[r] = max + std::log(sum);
        inv_sum[static_cast<size_t>(r)] = T(1) / sum;
      }
      Gemm<T>(Trans::kNo, Trans::kNo, rows, hs, i1, T(1), sc, i1, base + 2 * c, q, T(0), y_rows, c);
      for (int64_t r = 0; r < rows; ++r) ScaleRow(hs, inv_sum[static_cast<size_t>(r)], y_rows + r * c);
    }
  });
}

struct AttentionBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const AttentionBwdArgs<T>& a);
};

template <typename T>
void AttentionBwdCpu::Run(const KernelArgs& args, const AttentionBwdArgs<T>& a) {
  const int64_t b = a.shape.b, s = a.shape.s, c = a.shape.c, h = a.shape.h, q = a.shape.q;
  const T* dy = a.dy;
  const T* qkv = a.qkv;
  const T* y = a.y;
  const T* lse = a.lse;
  T* dqkv = a.dqkv;
  const int64_t hs = a.shape.hs, blocks = (s + kQueryRows - 1) / kQueryRows;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  args.ParallelFor(b * h, 1, [&](int64_t u0, int64_t u1) {
    std::vector<T> probs(static_cast<size_t>(kQueryRows * s)), dprobs(static_cast<size_t>(kQueryRows * s));
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bi = u / h, hi = u % h;
      const T* base = qkv + bi * s * q + hi * hs;  // q of (b, 0, head h); k at +c, v at +2c
      T* dbase = dqkv + bi * s * q + hi * hs;
      const T* dy_seq = dy + bi * s * c + hi * hs;
      const T* y_seq = y + bi * s * c + hi * hs;
      const T* lse_seq = lse + (bi * h + hi) * s;
      for (int64_t t = 0; t < s; ++t) {
        std::fill_n(dbase + t * q + c, hs, T(0));
        std::fill_n(dbase + t * q + 2 * c, hs, T(0));
      }
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t i0 = blk * kQueryRows, i1 = std::min(s, i0 + kQueryRows), rows = i1 - i0;
        T* p = probs.data();    // [rows, i1]
        T* ds = dprobs.data();  // [rows, i1]: dP, then dS
        Gemm<T>(Trans::kNo, Trans::kYes, rows, i1, hs, scale, base + i0 * q, q, base + c, q, T(0), p, i1);
        Gemm<T>(Trans::kNo, Trans::kYes, rows, i1, hs, T(1), dy_seq + i0 * c, c, base + 2 * c, q, T(0), ds, i1);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r, keys = i + 1;
          T* p_row = p + r * i1;
          T* ds_row = ds + r * i1;
          ExpShifted(keys, lse_seq[i], p_row);
          SoftmaxGradRow(keys, p_row, RowDot(hs, dy_seq + i * c, y_seq + i * c), ds_row);
          std::fill(p_row + keys, p_row + i1, T(0));
          std::fill(ds_row + keys, ds_row + i1, T(0));
        }
        Gemm<T>(Trans::kNo, Trans::kNo, rows, hs, i1, scale, ds, i1, base + c, q, T(0), dbase + i0 * q, q);
        Gemm<T>(Trans::kYes, Trans::kNo, i1, hs, rows, scale, ds, i1, base + i0 * q, q, T(1), dbase + c, q);
        Gemm<T>(Trans::kYes, Trans::kNo, i1, hs, rows, T(1), p, i1, dy_seq + i0 * c, c, T(1), dbase + 2 * c, q);
      }
    }
  });
}

}  // namespace

TESSEL_DEFINE_KERNEL(AttentionFwdCpu, AttentionFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(AttentionBwdCpu, AttentionBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::llm

// llm.attention.fwd/.bwd on CPU: GPT-2's causal multi-head attention as FlashAttention-2 computes it, in
// tiles of kQueryTile queries by kKeyTile keys; the reference of the CUDA kernels (attention.cu), which
// tile the same way. Neither direction forms the S x S score matrix, nor a query tile's row of it: a work
// item holds one tile of scores and its accumulators. Tiles wholly above the diagonal (keys after every
// query of the tile) are skipped; the diagonal tile is masked per element. The products go to OpenBLAS
// (one small GEMM per tile and product), reading q, k and v in place from qkv (leading dimension 3C); the
// softmax loops run in row_math.h.
//
// Forward, per work item (b, h, query tile i), over key tiles j = 0 .. i in order: S = scale Q_i K_j^T,
// then the online softmax: m = the running row max, P = exp(S - m) masked, l = the running row sum of P;
// when a row's max grows from m_old to m_new, its l and its accumulator O are rescaled by
// exp(m_old - m_new) before O += P V_j. At the end Y_i = O / l and lse_i = m + log(l). The tile of scores
// is kept key-major (S^T = scale K_j Q_i^T, then P^T), so that the running max and sum of the 64 queries
// are updated elementwise along the tile's rows (OnlineSoftmaxTile): a row-major tile would need two
// reductions across vector lanes per query and tile, which cost as much as the tile's products.
// Backward, per work item (b, h): D_t = dY_t . Y_t for every row t; dQ starts at zero; then over key
// tiles j, with dK_j and dV_j accumulated from zero, over query tiles i from the diagonal one to the last:
// P = exp(scale Q_i K_j^T - lse_i) masked, dV_j += P^T dY_i, dP = dY_i V_j^T, dS = P (dP - D_i),
// dQ_i += scale dS K_j, dK_j += scale dS^T Q_i; dK_j and dV_j are written when the query tiles are done.
// So every element of dqkv is written, and each (b, h) owns its columns of dqkv.
// Every item computes in the same order whichever thread runs it, so the results do not depend on the
// threads. Arguments: attention_args.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention_args.h"
#include "blas.h"
#include "row_math.h"

namespace tessel::kernels::llm {
namespace {

// 64 x 64, as the CUDA kernels' float tiles: a tile of scores (16 KiB in float) and the accumulator
// (64 x hs) stay in L1 and L2 at GPT-2's hs = 64. The code takes any sizes (the tests pass at 64 x 128,
// 64 x 32, 32 x 64 and 48 x 80 too); larger key tiles spend less in OpenBLAS's per-call packing.
constexpr int64_t kQueryTile = 64;  // Br
constexpr int64_t kKeyTile = 64;    // Bc

int64_t Tiles(int64_t n, int64_t tile) { return (n + tile - 1) / tile; }

// Of the keys [j0, j0 + cols), how many query row i may see (keys <= i): 0 .. cols.
int64_t VisibleKeys(int64_t i, int64_t j0, int64_t cols) { return std::clamp<int64_t>(i - j0 + 1, 0, cols); }

struct AttentionFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const AttentionFwdArgs<T>& a);
};

template <typename T>
void AttentionFwdCpu::Run(const KernelArgs& args, const AttentionFwdArgs<T>& a) {
  const int64_t b = a.shape.b, s = a.shape.s, c = a.shape.c, h = a.shape.h, q = a.shape.q, hs = a.shape.hs;
  const T* qkv = a.qkv;
  T* y = a.y;
  T* lse = a.lse;
  const int64_t query_tiles = Tiles(s, kQueryTile);
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  args.ParallelFor(b * h * query_tiles, 1, [&](int64_t u0, int64_t u1) {
    std::vector<T> score_tile(static_cast<size_t>(kKeyTile * kQueryTile));  // S^T, then P^T: [key][query]
    std::vector<T> acc(static_cast<size_t>(kQueryTile * hs));               // O, unnormalised
    std::vector<T> row_max(static_cast<size_t>(kQueryTile)), row_sum(static_cast<size_t>(kQueryTile));
    std::vector<T> rescale(static_cast<size_t>(kQueryTile));
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bi = u / (h * query_tiles), hi = (u / query_tiles) % h, i0 = (u % query_tiles) * kQueryTile;
      const int64_t i1 = std::min(s, i0 + kQueryTile), rows = i1 - i0;
      const T* base = qkv + bi * s * q + hi * hs;  // q of (b, 0, head h); k at +c, v at +2c
      T* st = score_tile.data();
      T* o = acc.data();
      T* m = row_max.data();
      T* l = row_sum.data();
      std::fill_n(m, rows, -std::numeric_limits<T>::infinity());
      std::fill_n(l, rows, T(0));
      // Key tiles that start at or before the tile's last query; the rest are above the diagonal.
      for (int64_t j0 = 0; j0 < i1; j0 += kKeyTile) {
        const int64_t cols = std::min(kKeyTile, i1 - j0);  // keys at or after i1 are masked for every row
        Gemm<T>(Trans::kNo, Trans::kYes, cols, rows, hs, scale, base + j0 * q + c, q, base + i0 * q, q, T(0), st,
                kQueryTile);
        OnlineSoftmaxTile(rows, cols, kQueryTile, j0 - i0, st, m, l, rescale.data());
        // Every query sees key 0, so after the first tile every m is finite; that tile writes O (beta 0).
        if (j0 > 0) {
          for (int64_t r = 0; r < rows; ++r) {
            if (rescale[static_cast<size_t>(r)] != T(1)) ScaleRow(hs, rescale[static_cast<size_t>(r)], o + r * hs);
          }
        }
        Gemm<T>(Trans::kYes, Trans::kNo, rows, hs, cols, T(1), st, kQueryTile, base + j0 * q + 2 * c, q,
                j0 == 0 ? T(0) : T(1), o, hs);
      }
      T* y_rows = y + (bi * s + i0) * c + hi * hs;
      T* lse_rows = lse + (bi * h + hi) * s + i0;
      for (int64_t r = 0; r < rows; ++r) {
        const T inv_sum = T(1) / l[r];
        for (int64_t d = 0; d < hs; ++d) y_rows[r * c + d] = o[r * hs + d] * inv_sum;
        lse_rows[r] = m[r] + std::log(l[r]);
      }
    }
  });
}

struct AttentionBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const AttentionBwdArgs<T>& a);
};

template <typename T>
void AttentionBwdCpu::Run(const KernelArgs& args, const AttentionBwdArgs<T>& a) {
  const int64_t b = a.shape.b, s = a.shape.s, c = a.shape.c, h = a.shape.h, q = a.shape.q, hs = a.shape.hs;
  const T* dy = a.dy;
  const T* qkv = a.qkv;
  const T* y = a.y;
  const T* lse = a.lse;
  T* dqkv = a.dqkv;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  args.ParallelFor(b * h, 1, [&](int64_t u0, int64_t u1) {
    std::vector<T> prob_tile(static_cast<size_t>(kQueryTile * kKeyTile));   // P
    std::vector<T> dprob_tile(static_cast<size_t>(kQueryTile * kKeyTile));  // dP, then dS
    std::vector<T> dk_acc(static_cast<size_t>(kKeyTile * hs)), dv_acc(static_cast<size_t>(kKeyTile * hs));
    std::vector<T> dvec(static_cast<size_t>(s));  // D
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bi = u / h, hi = u % h;
      const T* base = qkv + bi * s * q + hi * hs;  // q of (b, 0, head h); k at +c, v at +2c
      T* dbase = dqkv + bi * s * q + hi * hs;
      const T* dy_seq = dy + bi * s * c + hi * hs;
      const T* y_seq = y + bi * s * c + hi * hs;
      const T* lse_seq = lse + (bi * h + hi) * s;
      for (int64_t t = 0; t < s; ++t) {
        dvec[static_cast<size_t>(t)] = RowDot(hs, dy_seq + t * c, y_seq + t * c);
        std::fill_n(dbase + t * q, hs, T(0));
      }
      T* p = prob_tile.data();
      T* ds = dprob_tile.data();
      T* dk = dk_acc.data();
      T* dv = dv_acc.data();
      for (int64_t j0 = 0; j0 < s; j0 += kKeyTile) {
        const int64_t cols = std::min(kKeyTile, s - j0);
        const T* k_tile = base + j0 * q + c;
        const T* v_tile = base + j0 * q + 2 * c;
        std::fill_n(dk, cols * hs, T(0));
        std::fill_n(dv, cols * hs, T(0));
        // From the query tile holding key j0 (the diagonal one) to the last: the tiles above see none of
        // these keys.
        for (int64_t i0 = j0 - j0 % kQueryTile; i0 < s; i0 += kQueryTile) {
          const int64_t rows = std::min(kQueryTile, s - i0);
          const T* q_tile = base + i0 * q;
          const T* dy_tile = dy_seq + i0 * c;
          Gemm<T>(Trans::kNo, Trans::kYes, rows, cols, hs, scale, q_tile, q, k_tile, q, T(0), p, kKeyTile);
          Gemm<T>(Trans::kNo, Trans::kYes, rows, cols, hs, T(1), dy_tile, c, v_tile, q, T(0), ds, kKeyTile);
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t i = i0 + r, keys = VisibleKeys(i, j0, cols);
            T* p_row = p + r * kKeyTile;
            T* ds_row = ds + r * kKeyTile;
            ExpShifted(keys, lse_seq[i], p_row);
            SoftmaxGradRow(keys, p_row, dvec[static_cast<size_t>(i)], ds_row);
            std::fill(p_row + keys, p_row + cols, T(0));
            std::fill(ds_row + keys, ds_row + cols, T(0));
          }
          Gemm<T>(Trans::kYes, Trans::kNo, cols, hs, rows, T(1), p, kKeyTile, dy_tile, c, T(1), dv, hs);
          Gemm<T>(Trans::kNo, Trans::kNo, rows, hs, cols, scale, ds, kKeyTile, k_tile, q, T(1), dbase + i0 * q, q);
          Gemm<T>(Trans::kYes, Trans::kNo, cols, hs, rows, scale, ds, kKeyTile, q_tile, q, T(1), dk, hs);
        }
        for (int64_t r = 0; r < cols; ++r) {
          std::copy_n(dk + r * hs, hs, dbase + (j0 + r) * q + c);
          std::copy_n(dv + r * hs, hs, dbase + (j0 + r) * q + 2 * c);
        }
      }
    }
  });
}

}  // namespace

TESSEL_DEFINE_KERNEL(AttentionFwdCpu, AttentionFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(AttentionBwdCpu, AttentionBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::llm

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
// threads.
// Under bf16 a work item first widens the rows of q, k and v it reads (and dY, Y) to f32 (widen.h), runs the
// same f32 tiles over them, and rounds Y and dqkv to bf16 once as it stores them; lse is f32 (A). The CUDA
// kernels multiply on the tensor cores, which take bf16 operands: so P is rounded to bf16 before P V and
// P^T dY, and dS before dS K and dS^T Q, as FlashAttention-2 and PyTorch do, and this reference rounds
// them at the same points (RoundProducts). The row sums l, D and dS itself are computed from the f32 P.
// Arguments: attention_args.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "attention_args.h"
#include "blas.h"
#include "row_math.h"
#include "widen.h"

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

// Under bf16 (round = true): the `rows` x `cols` tile (rows ld apart) rounded to bf16 values, as the CUDA
// kernels round a tile of probabilities or of dS before they multiply it on the tensor cores.
template <typename F>
void RoundProducts(bool round, int64_t rows, int64_t cols, int64_t ld, F* tile) {
  if constexpr (std::is_same_v<F, float>) {
    if (!round) return;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < cols; ++j) tile[r * ld + j] = RoundToBf16(tile[r * ld + j]);
    }
  }
}

// One query tile [i0, i1) of one (b, h). Row t's q is at base + t ld, its k at + kv, its v at + 2 kv;
// Y's rows go ldy apart from y_rows, the tile's lse to lse_rows.
template <typename F>
struct ForwardScratch {
  std::vector<F> score_tile = std::vector<F>(static_cast<size_t>(kKeyTile * kQueryTile));  // S^T, then P^T
  std::vector<F> acc, row_max = std::vector<F>(kQueryTile), row_sum = std::vector<F>(kQueryTile);
  std::vector<F> rescale = std::vector<F>(kQueryTile);
  explicit ForwardScratch(int64_t hs) : acc(static_cast<size_t>(kQueryTile * hs)) {}  // O, unnormalised
};

template <typename F>
void ForwardTile(int64_t i0, int64_t i1, int64_t hs, F scale, const F* base, int64_t ld, int64_t kv, F* y_rows,
                 int64_t ldy, F* lse_rows, bool bf16, ForwardScratch<F>& w) {
  const int64_t rows = i1 - i0;
  F* st = w.score_tile.data();
  F* o = w.acc.data();
  F* m = w.row_max.data();
  F* l = w.row_sum.data();
  std::fill_n(m, rows, -std::numeric_limits<F>::infinity());
  std::fill_n(l, rows, F(0));
  // Key tiles that start at or before the tile's last query; the rest are above the diagonal.
  for (int64_t j0 = 0; j0 < i1; j0 += kKeyTile) {
    const int64_t cols = std::min(kKeyTile, i1 - j0);  // keys at or after i1 are masked for every row
    Gemm<F>(Trans::kNo, Trans::kYes, cols, rows, hs, scale, base + j0 * ld + kv, ld, base + i0 * ld, ld, F(0), st,
            kQueryTile);
    OnlineSoftmaxTile(rows, cols, kQueryTile, j0 - i0, st, m, l, w.rescale.data());
    RoundProducts(bf16, cols, rows, kQueryTile, st);  // l has the f32 P's sum
    // Every query sees key 0, so after the first tile every m is finite; that tile writes O (beta 0).
    if (j0 > 0) {
      for (int64_t r = 0; r < rows; ++r) {
        if (w.rescale[static_cast<size_t>(r)] != F(1)) ScaleRow(hs, w.rescale[static_cast<size_t>(r)], o + r * hs);
      }
    }
    Gemm<F>(Trans::kYes, Trans::kNo, rows, hs, cols, F(1), st, kQueryTile, base + j0 * ld + 2 * kv, ld,
            j0 == 0 ? F(0) : F(1), o, hs);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const F inv_sum = F(1) / l[r];
    for (int64_t d = 0; d < hs; ++d) y_rows[r * ldy + d] = o[r * hs + d] * inv_sum;
    lse_rows[r] = m[r] + std::log(l[r]);
  }
}

struct AttentionFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const AttentionFwdArgs<T>& a);
};

template <typename T>
void AttentionFwdCpu::Run(const KernelArgs& args, const AttentionFwdArgs<T>& a) {
  using F = Accumulate<T>;
  const int64_t b = a.shape.b, s = a.shape.s, c = a.shape.c, h = a.shape.h, q = a.shape.q, hs = a.shape.hs;
  const T* qkv = a.qkv;
  T* y = a.y;
  F* lse = a.lse;
  const int64_t query_tiles = Tiles(s, kQueryTile);
  const F scale = F(1) / std::sqrt(static_cast<F>(hs));
  args.ParallelFor(b * h * query_tiles, 1, [&](int64_t u0, int64_t u1) {
    ForwardScratch<F> w(hs);
    std::vector<F> wide = ScratchRow<T>(std::min(s, query_tiles * kQueryTile) * 3 * hs);  // bf16: q, k, v rows
    std::vector<F> y_tile = ScratchRow<T>(kQueryTile * hs);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bi = u / (h * query_tiles), hi = (u / query_tiles) % h, i0 = (u % query_tiles) * kQueryTile;
      const int64_t i1 = std::min(s, i0 + kQueryTile);
      const T* base = qkv + bi * s * q + hi * hs;  // q of (b, 0, head h); k at +c, v at +2c
      T* y_rows = y + (bi * s + i0) * c + hi * hs;
      F* lse_rows = lse + (bi * h + hi) * s + i0;
      if constexpr (!kWidened<T>) {
        ForwardTile<F>(i0, i1, hs, scale, base, q, c, y_rows, c, lse_rows, false, w);
      } else {
        // Rows [0, i1) of this head's q, k and v, widened, 3 hs apart; Y rounded as it is stored.
        for (int64_t t = 0; t < i1; ++t) {
          for (int64_t part = 0; part < 3; ++part)
            Widened(base + t * q + part * c, hs, wide.data() + (t * 3 + part) * hs);
        }
        ForwardTile<F>(i0, i1, hs, scale, wide.data(), 3 * hs, hs, y_tile.data(), hs, lse_rows, true, w);
        for (int64_t r = 0; r < i1 - i0; ++r) Store<T>(y_tile.data() + r * hs, hs, y_rows + r * c);
      }
    }
  });
}

// One (b, h): q, k, v as in ForwardTile (rows ld apart, k at + kv, v at + 2 kv), dY and Y rows ldy apart,
// dqkv in qkv's layout from dbase.
template <typename F>
struct BackwardScratch {
  std::vector<F> prob_tile = std::vector<F>(static_cast<size_t>(kQueryTile * kKeyTile));   // P
  std::vector<F> dprob_tile = std::vector<F>(static_cast<size_t>(kQueryTile * kKeyTile));  // dP, then dS
  std::vector<F> dk_acc, dv_acc, dvec;                                                     // dK_j, dV_j, D
  BackwardScratch(int64_t s, int64_t hs)
      : dk_acc(static_cast<size_t>(kKeyTile * hs)),
        dv_acc(static_cast<size_t>(kKeyTile * hs)),
        dvec(static_cast<size_t>(s)) {}
};

template <typename F>
void BackwardHead(int64_t s, int64_t hs, F scale, const F* base, int64_t ld, int64_t kv, const F* dy_seq,
                  const F* y_seq, int64_t ldy, const F* lse_seq, F* dbase, bool bf16, BackwardScratch<F>& w) {
  for (int64_t t = 0; t < s; ++t) {
    w.dvec[static_cast<size_t>(t)] = RowDot(hs, dy_seq + t * ldy, y_seq + t * ldy);
    std::fill_n(dbase + t * ld, hs, F(0));
  }
  F* p = w.prob_tile.data();
  F* ds = w.dprob_tile.data();
  F* dk = w.dk_acc.data();
  F* dv = w.dv_acc.data();
  for (int64_t j0 = 0; j0 < s; j0 += kKeyTile) {
    const int64_t cols = std::min(kKeyTile, s - j0);
    const F* k_tile = base + j0 * ld + kv;
    const F* v_tile = base + j0 * ld + 2 * kv;
    std::fill_n(dk, cols * hs, F(0));
    std::fill_n(dv, cols * hs, F(0));
    // From the query tile holding key j0 (the diagonal one) to the last: the tiles above see none of
    // these keys.
    for (int64_t i0 = j0 - j0 % kQueryTile; i0 < s; i0 += kQueryTile) {
      const int64_t rows = std::min(kQueryTile, s - i0);
      const F* q_tile = base + i0 * ld;
      const F* dy_tile = dy_seq + i0 * ldy;
      Gemm<F>(Trans::kNo, Trans::kYes, rows, cols, hs, scale, q_tile, ld, k_tile, ld, F(0), p, kKeyTile);
      Gemm<F>(Trans::kNo, Trans::kYes, rows, cols, hs, F(1), dy_tile, ldy, v_tile, ld, F(0), ds, kKeyTile);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r, keys = VisibleKeys(i, j0, cols);
        F* p_row = p + r * kKeyTile;
        F* ds_row = ds + r * kKeyTile;
        ExpShifted(keys, lse_seq[i], p_row);
        SoftmaxGradRow(keys, p_row, w.dvec[static_cast<size_t>(i)], ds_row);
        std::fill(p_row + keys, p_row + cols, F(0));
        std::fill(ds_row + keys, ds_row + cols, F(0));
      }
      RoundProducts(bf16, rows, cols, kKeyTile, p);  // dS has the f32 P's
      RoundProducts(bf16, rows, cols, kKeyTile, ds);
      Gemm<F>(Trans::kYes, Trans::kNo, cols, hs, rows, F(1), p, kKeyTile, dy_tile, ldy, F(1), dv, hs);
      Gemm<F>(Trans::kNo, Trans::kNo, rows, hs, cols, scale, ds, kKeyTile, k_tile, ld, F(1), dbase + i0 * ld, ld);
      Gemm<F>(Trans::kYes, Trans::kNo, cols, hs, rows, scale, ds, kKeyTile, q_tile, ld, F(1), dk, hs);
    }
    for (int64_t r = 0; r < cols; ++r) {
      std::copy_n(dk + r * hs, hs, dbase + (j0 + r) * ld + kv);
      std::copy_n(dv + r * hs, hs, dbase + (j0 + r) * ld + 2 * kv);
    }
  }
}

struct AttentionBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const AttentionBwdArgs<T>& a);
};

template <typename T>
void AttentionBwdCpu::Run(const KernelArgs& args, const AttentionBwdArgs<T>& a) {
  using F = Accumulate<T>;
  const int64_t b = a.shape.b, s = a.shape.s, c = a.shape.c, h = a.shape.h, q = a.shape.q, hs = a.shape.hs;
  const F scale = F(1) / std::sqrt(static_cast<F>(hs));
  args.ParallelFor(b * h, 1, [&](int64_t u0, int64_t u1) {
    BackwardScratch<F> w(s, hs);
    // bf16: this head's q, k, v (3 hs a row), dY and Y (hs a row) widened, and dqkv computed in f32.
    std::vector<F> wide = ScratchRow<T>(s * 3 * hs), dwide = ScratchRow<T>(s * 3 * hs);
    std::vector<F> dy_wide = ScratchRow<T>(s * hs), y_wide = ScratchRow<T>(s * hs);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bi = u / h, hi = u % h;
      const T* base = a.qkv + bi * s * q + hi * hs;  // q of (b, 0, head h); k at +c, v at +2c
      T* dbase = a.dqkv + bi * s * q + hi * hs;
      const T* dy_seq = a.dy + bi * s * c + hi * hs;
      const T* y_seq = a.y + bi * s * c + hi * hs;
      const F* lse_seq = a.lse + (bi * h + hi) * s;
      if constexpr (!kWidened<T>) {
        BackwardHead<F>(s, hs, scale, base, q, c, dy_seq, y_seq, c, lse_seq, dbase, false, w);
      } else {
        for (int64_t t = 0; t < s; ++t) {
          for (int64_t part = 0; part < 3; ++part)
            Widened(base + t * q + part * c, hs, wide.data() + (t * 3 + part) * hs);
          Widened(dy_seq + t * c, hs, dy_wide.data() + t * hs);
          Widened(y_seq + t * c, hs, y_wide.data() + t * hs);
        }
        BackwardHead<F>(s, hs, scale, wide.data(), 3 * hs, hs, dy_wide.data(), y_wide.data(), hs, lse_seq, dwide.data(),
                        true, w);
        for (int64_t t = 0; t < s; ++t) {
          for (int64_t part = 0; part < 3; ++part) {
            Store<T>(dwide.data() + (t * 3 + part) * hs, hs, dbase + t * q + part * c);
          }
        }
      }
    }
  });
}

}  // namespace

TESSEL_DEFINE_KERNEL_BF16(AttentionFwdCpu, AttentionFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL_BF16(AttentionBwdCpu, AttentionBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::llm

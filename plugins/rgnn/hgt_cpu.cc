// rgnn.hgt.fwd and rgnn.hgt.bwd on CPU: the attention core of HGT over the segment layout
// (<tessel/ops/rgnn.h>, workers/rgnn/MODELS.md "HGT").
//
// Forward, reorder on: per tile of a run's segments, q'_h = Q[dst]_h att[r,h]^T (one GEMM per head), so
// score = K[src]_h . q'_h * prior / sqrt(Dh) edge by edge; the softmax over all the edges of a destination
// is kept online (a running max per (row, head), the sum and the partial aggregates rescaled when it
// rises), so every edge is visited once; per segment A_h = sum_e w_e V[src]_h, and msg[r,h] is applied to
// the tile of aggregates (one GEMM per head). Only [N,H] statistics and tiles of kTileRows rows exist.
// Reorder off: K att and V msg are formed once per pair into [U,F] workspaces (compact materialisation
// without reordering) and read per edge through dedge_pair.
//
// Backward (the same phases for both settings), with c[i,h] = dAgg[i]_h . Agg[i]_h and
// dscore = alpha (dAgg[dst]_h . V[src]_h msg[r,h] - c[dst,h]):
//   D1, destination blocks: dQ, and the weight gradients datt, dmsg, dprior into per-group partials
//       (summed in group order, so the bits do not depend on the number of threads);
//   D2, source blocks: dK and dV, from k' = K att and m' = V msg per tile of pairs.
// Every output row is written by the one block that owns it: no atomics, a fixed order of sums.
// Arguments, the layout and its checks: hgt_args.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "blas.h"
#include "fused_support.h"
#include "hgt_args.h"
#include "row_ops.h"

namespace tessel::kernels::rgnn {
namespace {

// ---------------------------------------------------------------------------------------------------
// Forward

// Folds one logit into a running softmax whose terms are relative to the running max `mx`: raises mx
// when the logit exceeds it (rescaling the sum and the accumulators `acc0`, `acc1`, Dh wide, that hold
// terms relative to the old max) and returns exp(score - mx).
template <typename T>
inline T Fold(T score, T& mx, T& sum, int64_t dh, T* acc0, T* acc1) {
  if (score > mx) {
    if (sum != T(0)) {
      const T factor = std::exp(mx - score);
      sum *= factor;
      for (int64_t c = 0; c < dh; ++c) acc0[c] *= factor;
      if (acc1 != nullptr) {
        for (int64_t c = 0; c < dh; ++c) acc1[c] *= factor;
      }
    }
    mx = score;
  }
  const T w = std::exp(score - mx);
  sum += w;
  return w;
}

// The block's rows before its edges: Agg 0, the running max -inf, the sum 0.
template <typename T>
void StartBlock(int64_t row0, int64_t row1, int64_t f, int64_t h, T* agg, T* row_max, T* row_sum) {
  Zero((row1 - row0) * f, agg + row0 * f);
  std::fill(row_max + row0 * h, row_max + row1 * h, -std::numeric_limits<T>::infinity());
  Zero((row1 - row0) * h, row_sum + row0 * h);
}

// After them: Agg divided by the sum; a row without edges keeps Agg 0 and gets max = sum = 0.
template <typename T>
void FinishBlock(int64_t row0, int64_t row1, int64_t h, int64_t dh, T* agg, T* row_max, const T* row_sum) {
  for (int64_t i = row0; i < row1; ++i) {
    for (int64_t c = 0; c < h; ++c) {
      const T sum = row_sum[i * h + c];
      if (sum > T(0)) {
        const T inv = T(1) / sum;
        T* a = agg + i * h * dh + c * dh;
        for (int64_t j = 0; j < dh; ++j) a[j] *= inv;
      } else {
        row_max[i * h + c] = T(0);
      }
    }
  }
}

template <typename T>
void ForwardReordered(const KernelArgs& args, const HgtInputs<T>& in, T* agg, T* row_max, T* row_sum) {
  const DstLayout& l = in.dl;
  const int64_t f = in.f, h = in.h, dh = in.dh;
  args.ParallelFor(l.num_blocks, 1, [&](int64_t b0, int64_t b1) {
    const size_t tile = static_cast<size_t>(kTileRows * f);
    std::vector<T> qt(tile), qp(tile), at(tile), ct(tile), ref(static_cast<size_t>(kTileRows * h)),
        ps(static_cast<size_t>(h));
    for (int64_t b = b0; b < b1; ++b) {
      StartBlock(l.blk_row[b], l.blk_row[b + 1], f, h, agg, row_max, row_sum);
      for (int64_t q = l.blk_run[b]; q < l.blk_run[b + 1]; ++q) {
        const int64_t rel = l.run_rel[q];
        in.Scales(rel, ps.data());
        for (int64_t s0 = l.run_seg[q]; s0 < l.run_seg[q + 1]; s0 += kTileRows) {
          const int64_t rows = std::min(kTileRows, l.run_seg[q + 1] - s0);
          for (int64_t i = 0; i < rows; ++i) {
            std::copy_n(in.q + static_cast<int64_t>(l.seg_dst[s0 + i]) * f, f, qt.data() + i * f);
          }
          for (int64_t c = 0; c < h; ++c) {
            Gemm<T>(Trans::kNo, Trans::kYes, rows, dh, dh, T(1), qt.data() + c * dh, f, in.Att(rel, c), dh, T(0),
                    qp.data() + c * dh, f);
          }
          Zero(rows * f, at.data());
          const int64_t e_end = l.seg_edge[s0 + rows];
          for (int64_t i = 0; i < rows; ++i) {
            const int64_t s = s0 + i, dst = l.seg_dst[s];
            T* a_row = at.data() + i * f;
            const T* qp_row = qp.data() + i * f;
            for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) {
              if (e + kPrefetchAhead < e_end) {
                const int64_t ahead = l.edge_src[e + kPrefetchAhead];
                PrefetchRow(in.k + ahead * f, f);
                PrefetchRow(in.v + ahead * f, f);
              }
              const int64_t src = l.edge_src[e];
              const T* k_row = in.k + src * f;
              const T* v_row = in.v + src * f;
              for (int64_t c = 0; c < h; ++c) {
                const T score = DotRow(dh, k_row + c * dh, qp_row + c * dh) * ps[c];
                const T w =
                    Fold(score, row_max[dst * h + c], row_sum[dst * h + c], dh, a_row + c * dh, agg + dst * f + c * dh);
                AxpyRow(dh, w, v_row + c * dh, a_row + c * dh);
              }
            }
            std::copy_n(row_max + dst * h, h, ref.data() + i * h);
          }
          for (int64_t c = 0; c < h; ++c) {
            Gemm<T>(Trans::kNo, Trans::kNo, rows, dh, dh, T(1), at.data() + c * dh, f, in.Msg(rel, c), dh, T(0),
                    ct.data() + c * dh, f);
          }
          // Each aggregate was taken relative to its row's max at the time; bring it to the current one.
          for (int64_t i = 0; i < rows; ++i) {
            const int64_t dst = l.seg_dst[s0 + i];
            for (int64_t c = 0; c < h; ++c) {
              const T mx = row_max[dst * h + c], r_i = ref[static_cast<size_t>(i * h + c)];
              AxpyRow(dh, r_i == mx ? T(1) : std::exp(r_i - mx), ct.data() + i * f + c * dh, agg + dst * f + c * dh);
            }
          }
        }
      }
      FinishBlock(l.blk_row[b], l.blk_row[b + 1], h, dh, agg, row_max, row_sum);
    }
  });
}

// Reorder off: ka[u]_h = K[src(u)]_h att[r,h] and vm[u]_h = V[src(u)]_h msg[r,h] for every pair u.
template <typename T>
void PairProducts(const KernelArgs& args, const HgtInputs<T>& in, T* ka, T* vm) {
  const SrcLayout& l = in.sl;
  const int64_t f = in.f, h = in.h, dh = in.dh;
  args.ParallelFor(l.num_blocks, 1, [&](int64_t c0, int64_t c1) {
    const size_t tile = static_cast<size_t>(kTileRows * f);
    std::vector<T> kt(tile), vt(tile);
    for (int64_t blk = c0; blk < c1; ++blk) {
      for (int64_t p = l.blk_run[blk]; p < l.blk_run[blk + 1]; ++p) {
        const int64_t rel = l.run_rel[p];
        for (int64_t u0 = l.run_pair[p]; u0 < l.run_pair[p + 1]; u0 += kTileRows) {
          const int64_t rows = std::min(kTileRows, l.run_pair[p + 1] - u0);
          for (int64_t i = 0; i < rows; ++i) {
            const int64_t src = l.pair_src[u0 + i];
            std::copy_n(in.k + src * f, f, kt.data() + i * f);
            std::copy_n(in.v + src * f, f, vt.data() + i * f);
          }
          for (int64_t c = 0; c < h; ++c) {
            Gemm<T>(Trans::kNo, Trans::kNo, rows, dh, dh, T(1), kt.data() + c * dh, f, in.Att(rel, c), dh, T(0),
                    ka + u0 * f + c * dh, f);
            Gemm<T>(Trans::kNo, Trans::kNo, rows, dh, dh, T(1), vt.data() + c * dh, f, in.Msg(rel, c), dh, T(0),
                    vm + u0 * f + c * dh, f);
          }
        }
      }
    }
  });
}

template <typename T>
void ForwardMaterialised(const KernelArgs& args, const HgtInputs<T>& in, T* agg, T* row_max, T* row_sum) {
  const int64_t f = in.f, h = in.h, dh = in.dh;
  Workspace<T> products(args, 2 * in.sl.num_pairs * f);
  T* ka = products.get();
  T* vm = ka + in.sl.num_pairs * f;
  PairProducts(args, in, ka, vm);
  const DstLayout& l = in.dl;
  args.ParallelFor(l.num_blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> ps(static_cast<size_t>(h));
    for (int64_t b = b0; b < b1; ++b) {
      StartBlock(l.blk_row[b], l.blk_row[b + 1], f, h, agg, row_max, row_sum);
      for (int64_t q = l.blk_run[b]; q < l.blk_run[b + 1]; ++q) {
        in.Scales(l.run_rel[q], ps.data());
        for (int64_t s = l.run_seg[q]; s < l.run_seg[q + 1]; ++s) {
          const int64_t dst = l.seg_dst[s];
          const T* q_row = in.q + dst * f;
          T* agg_row = agg + dst * f;
          for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) {
            const int64_t u = in.edge_pair[e];
            for (int64_t c = 0; c < h; ++c) {
              const T score = DotRow(dh, ka + u * f + c * dh, q_row + c * dh) * ps[c];
              const T w = Fold(score, row_max[dst * h + c], row_sum[dst * h + c], dh, agg_row + c * dh,
                               static_cast<T*>(nullptr));
              AxpyRow(dh, w, vm + u * f + c * dh, agg_row + c * dh);
            }
          }
        }
      }
      FinishBlock(l.blk_row[b], l.blk_row[b + 1], h, dh, agg, row_max, row_sum);
    }
  });
}

// ---------------------------------------------------------------------------------------------------
// Backward

template <typename T>
struct BackwardArgs {
  const T* dagg = nullptr;     // [N, F]
  const T* row_max = nullptr;  // [N, H]
  const T* c = nullptr;        // [N, H]: dAgg . Agg per head
  const T* inv_sum = nullptr;  // [N, H]: 1 / row_sum, 0 for a row without edges
};

// Phase D1 over the destination blocks: dQ, and datt/dmsg/dprior into `partial` (groups x per_group:
// datt [R,H,Dh,Dh], dmsg [R,H,Dh,Dh], dprior [R,H] each).
template <typename T>
void BackwardDst(const KernelArgs& args, const HgtInputs<T>& in, const BackwardArgs<T>& ba, int64_t groups,
                 int64_t per_group, T* partial, T* dq) {
  const DstLayout& l = in.dl;
  const int64_t f = in.f, h = in.h, dh = in.dh, weight = in.r * h * dh * dh;
  args.ParallelFor(groups, 1, [&](int64_t g0, int64_t g1) {
    const size_t tile = static_cast<size_t>(kTileRows * f);
    std::vector<T> qt(tile), gt(tile), qp(tile), da(tile), at(tile), dk(tile), tmp(tile), ps(static_cast<size_t>(h)),
        dp(static_cast<size_t>(h));
    for (int64_t g = g0; g < g1; ++g) {
      T* datt_g = partial + g * per_group;
      T* dmsg_g = datt_g + weight;
      T* dprior_g = dmsg_g + weight;
      Zero(per_group, datt_g);
      for (int64_t b = GroupBegin(g, groups, l.num_blocks); b < GroupBegin(g + 1, groups, l.num_blocks); ++b) {
        Zero((l.blk_row[b + 1] - l.blk_row[b]) * f, dq + l.blk_row[b] * f);
        for (int64_t q = l.blk_run[b]; q < l.blk_run[b + 1]; ++q) {
          const int64_t rel = l.run_rel[q];
          in.Scales(rel, ps.data());
          Zero(h, dp.data());
          for (int64_t s0 = l.run_seg[q]; s0 < l.run_seg[q + 1]; s0 += kTileRows) {
            const int64_t rows = std::min(kTileRows, l.run_seg[q + 1] - s0);
            for (int64_t i = 0; i < rows; ++i) {
              const int64_t dst = l.seg_dst[s0 + i];
              std::copy_n(in.q + dst * f, f, qt.data() + i * f);
              std::copy_n(ba.dagg + dst * f, f, gt.data() + i * f);
            }
            for (int64_t c = 0; c < h; ++c) {
              Gemm<T>(Trans::kNo, Trans::kYes, rows, dh, dh, T(1), qt.data() + c * dh, f, in.Att(rel, c), dh, T(0),
                      qp.data() + c * dh, f);
              Gemm<T>(Trans::kNo, Trans::kYes, rows, dh, dh, T(1), gt.data() + c * dh, f, in.Msg(rel, c), dh, T(0),
                      da.data() + c * dh, f);
            }
            Zero(rows * f, at.data());
            Zero(rows * f, dk.data());
            const int64_t e_end = l.seg_edge[s0 + rows];
            for (int64_t i = 0; i < rows; ++i) {
              const int64_t s = s0 + i, dst = l.seg_dst[s];
              const int64_t off = i * f;
              for (int64_t e = l.seg_edge[s]; e < l.seg_edge[s + 1]; ++e) {
                if (e + kPrefetchAhead < e_end) {
                  const int64_t ahead = l.edge_src[e + kPrefetchAhead];
                  PrefetchRow(in.k + ahead * f, f);
                  PrefetchRow(in.v + ahead * f, f);
                }
                const int64_t src = l.edge_src[e];
                const T* k_row = in.k + src * f;
                const T* v_row = in.v + src * f;
                for (int64_t c = 0; c < h; ++c) {
                  const int64_t o = off + c * dh;
                  const T raw = DotRow(dh, k_row + c * dh, qp.data() + o);
                  const T alpha = std::exp(raw * ps[c] - ba.row_max[dst * h + c]) * ba.inv_sum[dst * h + c];
                  const T dalpha = DotRow(dh, da.data() + o, v_row + c * dh);
                  const T dscore = alpha * (dalpha - ba.c[dst * h + c]);
                  AxpyRow(dh, alpha, v_row + c * dh, at.data() + o);
                  AxpyRow(dh, dscore, k_row + c * dh, dk.data() + o);
                  dp[c] += dscore * raw;
                }
              }
            }
            for (int64_t c = 0; c < h; ++c) {
              const T* att_rc = in.Att(rel, c);
              // dQ_h += ps Dk_h att; datt += ps Dk_h^T Q_h; dmsg += A_h^T dAgg_h.
              Gemm<T>(Trans::kNo, Trans::kNo, rows, dh, dh, ps[c], dk.data() + c * dh, f, att_rc, dh, T(0),
                      tmp.data() + c * dh, f);
              Gemm<T>(Trans::kYes, Trans::kNo, dh, dh, rows, ps[c], dk.data() + c * dh, f, qt.data() + c * dh, f, T(1),
                      datt_g + (rel * h + c) * dh * dh, dh);
              Gemm<T>(Trans::kYes, Trans::kNo, dh, dh, rows, T(1), at.data() + c * dh, f, gt.data() + c * dh, f, T(1),
                      dmsg_g + (rel * h + c) * dh * dh, dh);
            }
            for (int64_t i = 0; i < rows; ++i) {
              AddRow(f, tmp.data() + i * f, dq + static_cast<int64_t>(l.seg_dst[s0 + i]) * f);
            }
          }
          // d score / d prior = raw / sqrt(Dh).
          for (int64_t c = 0; c < h; ++c) dprior_g[rel * h + c] += dp[c] * in.scale;
        }
      }
    }
  });
}

// Phase D2 over the source blocks: dK and dV.
template <typename T>
void BackwardSrc(const KernelArgs& args, const HgtInputs<T>& in, const BackwardArgs<T>& ba, T* dk, T* dv) {
  const SrcLayout& l = in.sl;
  const int32_t* seg_dst = in.dl.seg_dst;
  const int64_t f = in.f, h = in.h, dh = in.dh;
  args.ParallelFor(l.num_blocks, 1, [&](int64_t c0, int64_t c1) {
    const size_t tile = static_cast<size_t>(kTileRows * f);
    std::vector<T> kt(tile), vt(tile), kp(tile), mp(tile), bt(tile), dqt(tile), tmp(tile), ps(static_cast<size_t>(h));
    for (int64_t blk = c0; blk < c1; ++blk) {
      const int64_t row0 = l.blk_row[blk], row1 = l.blk_row[blk + 1];
      Zero((row1 - row0) * f, dk + row0 * f);
      Zero((row1 - row0) * f, dv + row0 * f);
      for (int64_t p = l.blk_run[blk]; p < l.blk_run[blk + 1]; ++p) {
        const int64_t rel = l.run_rel[p];
        in.Scales(rel, ps.data());
        for (int64_t u0 = l.run_pair[p]; u0 < l.run_pair[p + 1]; u0 += kTileRows) {
          const int64_t rows = std::min(kTileRows, l.run_pair[p + 1] - u0);
          for (int64_t i = 0; i < rows; ++i) {
            const int64_t src = l.pair_src[u0 + i];
            std::copy_n(in.k + src * f, f, kt.data() + i * f);
            std::copy_n(in.v + src * f, f, vt.data() + i * f);
          }
          for (int64_t c = 0; c < h; ++c) {
            Gemm<T>(Trans::kNo, Trans::kNo, rows, dh, dh, T(1), kt.data() + c * dh, f, in.Att(rel, c), dh, T(0),
                    kp.data() + c * dh, f);
            Gemm<T>(Trans::kNo, Trans::kNo, rows, dh, dh, T(1), vt.data() + c * dh, f, in.Msg(rel, c), dh, T(0),
                    mp.data() + c * dh, f);
          }
          Zero(rows * f, bt.data());
          Zero(rows * f, dqt.data());
          const int64_t e_end = l.pair_edge[u0 + rows];
          for (int64_t i = 0; i < rows; ++i) {
            const int64_t u = u0 + i, off = i * f;
            for (int64_t e = l.pair_edge[u]; e < l.pair_edge[u + 1]; ++e) {
              if (e + kPrefetchAhead < e_end) {
                const int64_t ahead = seg_dst[l.edge_seg[e + kPrefetchAhead]];
                PrefetchRow(in.q + ahead * f, f);
                PrefetchRow(ba.dagg + ahead * f, f);
              }
              const int64_t dst = seg_dst[l.edge_seg[e]];
              const T* q_row = in.q + dst * f;
              const T* g_row = ba.dagg + dst * f;
              for (int64_t c = 0; c < h; ++c) {
                const int64_t o = off + c * dh;
                const T raw = DotRow(dh, kp.data() + o, q_row + c * dh);
                const T alpha = std::exp(raw * ps[c] - ba.row_max[dst * h + c]) * ba.inv_sum[dst * h + c];
                const T dalpha = DotRow(dh, mp.data() + o, g_row + c * dh);
                const T dscore = alpha * (dalpha - ba.c[dst * h + c]);
                AxpyRow(dh, alpha, g_row + c * dh, bt.data() + o);
                AxpyRow(dh, dscore, q_row + c * dh, dqt.data() + o);
              }
            }
          }
          // dV_h += B_h msg^T, then dK_h += ps Dq_h att^T.
          for (int64_t c = 0; c < h; ++c) {
            Gemm<T>(Trans::kNo, Trans::kYes, rows, dh, dh, T(1), bt.data() + c * dh, f, in.Msg(rel, c), dh, T(0),
                    tmp.data() + c * dh, f);
          }
          for (int64_t i = 0; i < rows; ++i) {
            AddRow(f, tmp.data() + i * f, dv + static_cast<int64_t>(l.pair_src[u0 + i]) * f);
          }
          for (int64_t c = 0; c < h; ++c) {
            Gemm<T>(Trans::kNo, Trans::kYes, rows, dh, dh, ps[c], dqt.data() + c * dh, f, in.Att(rel, c), dh, T(0),
                    tmp.data() + c * dh, f);
          }
          for (int64_t i = 0; i < rows; ++i) {
            AddRow(f, tmp.data() + i * f, dk + static_cast<int64_t>(l.pair_src[u0 + i]) * f);
          }
        }
      }
    }
  });
}

template <typename T>
void Backward(const KernelArgs& args, const HgtInputs<T>& in, const T* dagg, const T* agg, const T* row_max,
              const T* row_sum, T* dk, T* dq, T* dv, T* datt, T* dmsg, T* dprior) {
  const int64_t n = in.n, h = in.h, dh = in.dh;
  Workspace<T> stats(args, 2 * n * h);
  T* c = stats.get();
  T* inv_sum = c + n * h;
  args.ParallelFor(n, 256, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t hd = 0; hd < h; ++hd) {
        const int64_t o = (i * h + hd) * dh;
        c[i * h + hd] = DotRow(dh, dagg + o, agg + o);
        const T sum = row_sum[i * h + hd];
        inv_sum[i * h + hd] = sum > T(0) ? T(1) / sum : T(0);
      }
    }
  });
  BackwardArgs<T> ba;
  ba.dagg = dagg;
  ba.row_max = row_max;
  ba.c = c;
  ba.inv_sum = inv_sum;

  const int64_t weight = in.r * h * dh * dh, per_group = 2 * weight + in.r * h;
  const int64_t groups = GradientGroups(in.dl.num_blocks, per_group * static_cast<int64_t>(sizeof(T)));
  {
    Workspace<T> partial(args, groups * per_group);
    BackwardDst(args, in, ba, groups, per_group, partial.get(), dq);
    // The weight gradients: the groups' partials in group order.
    args.ParallelFor(per_group, 4096, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        T sum = T(0);
        for (int64_t g = 0; g < groups; ++g) sum += partial.get()[g * per_group + i];
        if (i < weight) {
          datt[i] = sum;
        } else if (i < 2 * weight) {
          dmsg[i - weight] = sum;
        } else {
          dprior[i - 2 * weight] = sum;
        }
      }
    });
  }
  BackwardSrc(args, in, ba, dk, dv);
}

struct HgtFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const HgtFwdArgs<T>& a) {
    if (a.in.reorder) {
      ForwardReordered(args, a.in, a.agg, a.row_max, a.row_sum);
    } else {
      ForwardMaterialised(args, a.in, a.agg, a.row_max, a.row_sum);
    }
  }
};

struct HgtBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const HgtBwdArgs<T>& a) {
    Backward(args, a.in, a.dagg, a.agg, a.row_max, a.row_sum, a.dk, a.dq, a.dv, a.datt, a.dmsg, a.dprior);
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(HgtFwdCpu, HgtFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(HgtBwdCpu, HgtBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn

// rgnn.rgat.bwd and rgnn.rgat_embed.bwd on CPU: the backward of the fused RGAT layer over the segment
// layout (<tessel/ops/rgnn.h>, workers/rgnn/MODELS.md "RGAT"); the forward, and how the logits and
// messages are formed, is rgat_fwd_cpu.cc.
//
// c[i, h] = dHeads[i]_h . heads[i]_h (= sum_e alpha dalpha over the edges into i); B1 over the destination
// blocks: ds_dst and the gradient through s_dst (dX of destination rows); B2 over the source blocks: the
// messages and ds_src (dX of source rows, dW); the weight-type gradients go to per-group partials summed
// in group order after each phase, so the result depends on the shapes only, never on the number of
// threads. Every row a phase writes belongs to one block of that phase: no atomics, no races. Arguments,
// the layout and its checks: rgat_args.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "blas.h"
#include "fused_support.h"
#include "rgat_args.h"
#include "rgat_cpu.h"
#include "row_ops.h"

namespace tessel::kernels::rgnn {
namespace {

using rgat_cpu::ProjectAttention, rgat_cpu::Softmax;

// Whether no two input rows share a table row. Then the rows (r, row_id[j]) of dW that a block writes
// belong to it alone; otherwise the embed backward runs its blocks one after another.
bool RowIdsDistinct(const KernelArgs& args, const int64_t* row_id, int64_t m, int64_t v) {
  Workspace<uint8_t> seen(args, v);
  Zero(v, seen.get());
  for (int64_t i = 0; i < m; ++i) {
    if (seen.get()[row_id[i]]) return false;
    seen.get()[row_id[i]] = 1;
  }
  return true;
}

// The gradient reaching head h of output row i: dOut[i]_h (concat) or dOut[i] / H (mean), as a row of
// dOut and a scale.
template <typename T>
struct HeadGrad {
  const T* dout;  // [N, O]
  int64_t o, dh;
  bool mean;
  T scale;
  HeadGrad(const T* dout_, const RgatDims& d)
      : dout(dout_), o(d.o), dh(d.dh), mean(d.mean), scale(d.mean ? T(1) / static_cast<T>(d.heads) : T(1)) {}
  const T* Row(int64_t i, int64_t h) const { return dout + i * o + (mean ? 0 : h * dh); }
};

// Per-group partial sums of weight-type gradients: `slice` values per (group, relation), zeroed on first
// use, summed in group order.
template <typename T>
class Partials {
 public:
  Partials(const KernelArgs& args, int64_t groups, int64_t r, int64_t slice)
      : groups_(groups),
        r_(r),
        slice_(slice),
        data_(args, groups * r * slice),
        touched_(static_cast<size_t>(groups * r), 0) {}
  int64_t groups() const { return groups_; }
  // The slice of (group g, relation rel), zeroed the first time. Only group g's task calls this for g.
  T* Slice(int64_t g, int64_t rel) {
    T* p = data_.get() + (g * r_ + rel) * slice_;
    uint8_t& t = touched_[static_cast<size_t>(g * r_ + rel)];
    if (!t) {
      Zero(slice_, p);
      t = 1;
    }
    return p;
  }
  // out[0..n) += sum over groups, in order, of values [offset, offset + n) of relation rel's slices.
  void AddTo(int64_t rel, int64_t offset, int64_t n, T* out) const {
    for (int64_t g = 0; g < groups_; ++g) {
      if (touched_[static_cast<size_t>(g * r_ + rel)]) AddRow(n, data_.get() + (g * r_ + rel) * slice_ + offset, out);
    }
  }

 private:
  int64_t groups_, r_, slice_;
  Workspace<T> data_;
  std::vector<uint8_t> touched_;
};

// The groups of `num_blocks` blocks for partials of `slice` values per relation (at most 32 MiB of them
// per phase).
template <typename T>
int64_t Groups(int64_t num_blocks, int64_t r, int64_t slice) {
  return GradientGroups(num_blocks, r * slice * static_cast<int64_t>(sizeof(T)), int64_t{32} << 20);
}

// Runs fn(g, block) for every block of every group, groups in parallel, a group's blocks in order.
template <typename F>
void ForGroups(const KernelArgs& args, int64_t groups, int64_t num_blocks, F&& fn) {
  args.ParallelFor(groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      for (int64_t b = GroupBegin(g, groups, num_blocks); b < GroupBegin(g + 1, groups, num_blocks); ++b) fn(g, b);
    }
  });
}

// c[i, h] = dHeads[i]_h . heads[i]_h: the softmax's sum_e alpha dalpha over the edges into i.
template <typename T>
void HeadDots(const KernelArgs& args, const RgatDims& d, const HeadGrad<T>& dg, const T* heads, T* c) {
  args.ParallelFor(d.n, 256, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t h = 0; h < d.heads; ++h) {
        c[i * d.heads + h] = dg.scale * DotRow(d.dh, dg.Row(i, h), heads + i * d.f + h * d.dh);
      }
    }
  });
}

// dW, datt_src, datt_dst of the feature backward.
template <typename T>
struct WeightGrads {
  T *dw, *datt_src, *datt_dst;
};

template <typename T>
void BackwardFeatures(const KernelArgs& args, const RgatDims& d, const RgatLayout& l, const T* dout, const T* x,
                      const T* w, const RgatSaved<T>& sv, T* dx, const WeightGrads<T>& out) {
  const HeadGrad<T> dg(dout, d);
  const Softmax<T> sm{sv.s_src, sv.s_dst, sv.row_max, sv.row_sum, d.heads, static_cast<T>(d.slope)};
  const int64_t kf = d.k * d.f, hk = d.heads * d.k, hd = d.heads * d.dh;
  Workspace<T> c(args, d.n * d.heads);
  HeadDots(args, d, dg, sv.heads, c.get());
  Workspace<T> wa(args, d.reorder ? 2 * d.r * hk : 0);
  if (d.reorder) {
    ProjectAttention(args, d, w, sv.att_src, wa.get());
    ProjectAttention(args, d, w, sv.att_dst, wa.get() + d.r * hk);
  }
  const T* wa_src = wa.get();
  const T* wa_dst = d.reorder ? wa.get() + d.r * hk : nullptr;
  if (dx != nullptr) {
    args.ParallelFor(d.m, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d.k)),
                     [&](int64_t i0, int64_t i1) { Zero((i1 - i0) * d.k, dx + i0 * d.k); });
  }
  // The per-edge dz = alpha (dalpha - c[dst]) LeakyReLU'(raw), summed into ds of the edge's item.
  auto dz = [&](int64_t pair, int64_t seg, int64_t row, int64_t h, T dalpha) {
    const T raw = sm.Raw(pair, seg, h);
    return sm.Alpha(sm.Score(raw), row, h) * (dalpha - c.get()[row * d.heads + h]) * sm.Slope(raw);
  };

  // B1, over the destination blocks: per tile of segments, dA_h = dHeads[dst]_h W_{r,h}^T, dalpha = dA_h .
  // X[src], ds_dst; then the s_dst path into dX[dst] and the dwa_dst (reorder) or dW, datt_dst partials.
  {
    const DstLayout& dl = l.d;
    const int64_t slice = d.reorder ? hk : kf + hd;  // [dwa [H, K]] or [dW [K, F], datt [H, Dh]]
    Partials<T> part(args, Groups<T>(dl.num_blocks, d.r, slice), d.r, slice);
    args.ParallelFor(part.groups(), 1, [&](int64_t g0, int64_t g1) {
      std::vector<T> gt(static_cast<size_t>(kTileRows * d.o)), da(static_cast<size_t>(d.heads * kTileRows * d.k)),
          ds(static_cast<size_t>(kTileRows * d.heads)), xt, zt, qt, gx;
      if (!d.reorder) {
        xt.resize(static_cast<size_t>(kTileRows * d.k));
        zt.resize(static_cast<size_t>(kTileRows * d.f));
        qt.resize(static_cast<size_t>(kTileRows * d.f));
        gx.resize(static_cast<size_t>(kTileRows * d.k));
      }
      for (int64_t g = g0; g < g1; ++g) {
        for (int64_t b = GroupBegin(g, part.groups(), dl.num_blocks);
             b < GroupBegin(g + 1, part.groups(), dl.num_blocks); ++b) {
          for (int64_t q = dl.blk_run[b]; q < dl.blk_run[b + 1]; ++q) {
            const int64_t rel = dl.run_rel[q];
            const T* w_r = w + rel * kf;
            T* p = part.Slice(g, rel);
            for (int64_t s0 = dl.run_seg[q]; s0 < dl.run_seg[q + 1]; s0 += kTileRows) {
              const int64_t rows = std::min(kTileRows, dl.run_seg[q + 1] - s0);
              for (int64_t i = 0; i < rows; ++i) {
                std::copy_n(dout + static_cast<int64_t>(dl.seg_dst[s0 + i]) * d.o, d.o, gt.data() + i * d.o);
              }
              for (int64_t h = 0; h < d.heads; ++h) {
                Gemm<T>(Trans::kNo, Trans::kYes, rows, d.k, d.dh, dg.scale, gt.data() + (d.mean ? 0 : h * d.dh), d.o,
                        w_r + h * d.dh, d.f, T(0), da.data() + h * kTileRows * d.k, d.k);
              }
              Zero(rows * d.heads, ds.data());
              for (int64_t i = 0; i < rows; ++i) {
                const int64_t s = s0 + i, row = dl.seg_dst[s];
                for (int64_t e = dl.seg_edge[s]; e < dl.seg_edge[s + 1]; ++e) {
                  if (e + kPrefetchAhead < dl.num_edges)
                    PrefetchRow(x + static_cast<int64_t>(dl.edge_src[e + kPrefetchAhead]) * d.k, d.k);
                  const T* xs = x + static_cast<int64_t>(dl.edge_src[e]) * d.k;
                  for (int64_t h = 0; h < d.heads; ++h) {
                    const T dalpha = DotRow(d.k, da.data() + (h * kTileRows + i) * d.k, xs);
                    ds[i * d.heads + h] += dz(l.edge_pair[e], s, row, h, dalpha);
                  }
                }
              }
              if (d.reorder) {
                for (int64_t i = 0; i < rows; ++i) {
                  const int64_t row = dl.seg_dst[s0 + i];
                  const T* xd = x + row * d.k;
                  for (int64_t h = 0; h < d.heads; ++h) {
                    const T v = ds[i * d.heads + h];
                    if (dx != nullptr) AxpyRow(d.k, v, wa_dst + (rel * d.heads + h) * d.k, dx + row * d.k);
                    AxpyRow(d.k, v, xd, p + h * d.k);
                  }
                }
                continue;
              }
              // Through z(dst, r) = X[dst] W_r: dz_h = ds_h att_dst[r, h] (Q); datt_dst += ds z;
              // dW_r += X[dst]^T Q; dX[dst] += Q W_r^T.
              for (int64_t i = 0; i < rows; ++i) {
                std::copy_n(x + static_cast<int64_t>(dl.seg_dst[s0 + i]) * d.k, d.k, xt.data() + i * d.k);
              }
              Gemm<T>(Trans::kNo, Trans::kNo, rows, d.f, d.k, T(1), xt.data(), d.k, w_r, d.f, T(0), zt.data(), d.f);
              for (int64_t i = 0; i < rows; ++i) {
                for (int64_t h = 0; h < d.heads; ++h) {
                  const T v = ds[i * d.heads + h];
                  const T* a = sv.att_dst + (rel * d.heads + h) * d.dh;
                  T* qrow = qt.data() + i * d.f + h * d.dh;
                  for (int64_t j = 0; j < d.dh; ++j) qrow[j] = v * a[j];
                  AxpyRow(d.dh, v, zt.data() + i * d.f + h * d.dh, p + kf + h * d.dh);
                }
              }
              Gemm<T>(Trans::kYes, Trans::kNo, d.k, d.f, rows, T(1), xt.data(), d.k, qt.data(), d.f, T(1), p, d.f);
              if (dx == nullptr) continue;
              Gemm<T>(Trans::kNo, Trans::kYes, rows, d.k, d.f, T(1), qt.data(), d.f, w_r, d.f, T(0), gx.data(), d.k);
              for (int64_t i = 0; i < rows; ++i) {
                AddRow(d.k, gx.data() + i * d.k, dx + static_cast<int64_t>(dl.seg_dst[s0 + i]) * d.k);
              }
            }
          }
        }
      }
    });
    // dW and datt_dst from B1's partials (this is where dW starts).
    args.ParallelFor(d.r, 1, [&](int64_t r0, int64_t r1) {
      std::vector<T> dwa(static_cast<size_t>(hk));
      for (int64_t rel = r0; rel < r1; ++rel) {
        T* dw_r = out.dw + rel * kf;
        T* datt_r = out.datt_dst + rel * hd;
        Zero(kf, dw_r);
        Zero(hd, datt_r);
        if (!d.reorder) {
          part.AddTo(rel, 0, kf, dw_r);
          part.AddTo(rel, kf, hd, datt_r);
          continue;
        }
        // datt_dst[r, h] = W_{r,h}^T dwa_dst[r, h]; dW_{r,h} = dwa_dst[r, h] (outer) att_dst[r, h].
        Zero(hk, dwa.data());
        part.AddTo(rel, 0, hk, dwa.data());
        for (int64_t j = 0; j < d.k; ++j) {
          for (int64_t h = 0; h < d.heads; ++h) {
            const T v = dwa[static_cast<size_t>(h * d.k + j)];
            AxpyRow(d.dh, v, w + rel * kf + j * d.f + h * d.dh, datt_r + h * d.dh);
            AxpyRow(d.dh, v, sv.att_dst + (rel * d.heads + h) * d.dh, dw_r + j * d.f + h * d.dh);
          }
        }
      }
    });
  }

  // B2, over the source blocks: per tile of pairs, Z = X[src] W_r, B_h = sum_e alpha dHeads[dst]_h,
  // dalpha = dHeads[dst]_h . Z_h, ds_src; dX[src] += B W_r^T, dW_r += X[src]^T B (B including the
  // attention path ds_src att_src with reorder off), and the s_src path through wa_src with it on.
  {
    const SrcLayout& sl = l.s;
    const int64_t slice = kf + (d.reorder ? hk : hd);  // [dW [K, F], dwa [H, K] or datt [H, Dh]]
    Partials<T> part(args, Groups<T>(sl.num_blocks, d.r, slice), d.r, slice);
    args.ParallelFor(part.groups(), 1, [&](int64_t g0, int64_t g1) {
      std::vector<T> xt(static_cast<size_t>(kTileRows * d.k)), zt(static_cast<size_t>(kTileRows * d.f)),
          bt(static_cast<size_t>(kTileRows * d.f)), ds(static_cast<size_t>(kTileRows * d.heads)),
          gx(static_cast<size_t>(kTileRows * d.k));
      for (int64_t g = g0; g < g1; ++g) {
        for (int64_t cb = GroupBegin(g, part.groups(), sl.num_blocks);
             cb < GroupBegin(g + 1, part.groups(), sl.num_blocks); ++cb) {
          for (int64_t pr = sl.blk_run[cb]; pr < sl.blk_run[cb + 1]; ++pr) {
            const int64_t rel = sl.run_rel[pr];
            const T* w_r = w + rel * kf;
            T* p = part.Slice(g, rel);
            for (int64_t u0 = sl.run_pair[pr]; u0 < sl.run_pair[pr + 1]; u0 += kTileRows) {
              const int64_t rows = std::min(kTileRows, sl.run_pair[pr + 1] - u0);
              for (int64_t i = 0; i < rows; ++i) {
                std::copy_n(x + static_cast<int64_t>(sl.pair_src[u0 + i]) * d.k, d.k, xt.data() + i * d.k);
              }
              Gemm<T>(Trans::kNo, Trans::kNo, rows, d.f, d.k, T(1), xt.data(), d.k, w_r, d.f, T(0), zt.data(), d.f);
              Zero(rows * d.f, bt.data());
              Zero(rows * d.heads, ds.data());
              for (int64_t i = 0; i < rows; ++i) {
                const int64_t u = u0 + i;
                for (int64_t e = sl.pair_edge[u]; e < sl.pair_edge[u + 1]; ++e) {
                  if (e + kPrefetchAhead < sl.num_edges)
                    PrefetchRow(dg.Row(l.d.seg_dst[sl.edge_seg[e + kPrefetchAhead]], 0), d.o);
                  const int64_t seg = sl.edge_seg[e], row = l.d.seg_dst[seg];
                  for (int64_t h = 0; h < d.heads; ++h) {
                    const T* gh = dg.Row(row, h);
                    const T alpha = sm.Alpha(sm.Score(sm.Raw(u, seg, h)), row, h);
                    AxpyRow(d.dh, alpha * dg.scale, gh, bt.data() + i * d.f + h * d.dh);
                    const T dalpha = dg.scale * DotRow(d.dh, gh, zt.data() + i * d.f + h * d.dh);
                    ds[i * d.heads + h] += dz(u, seg, row, h, dalpha);
                  }
                }
              }
              if (!d.reorder) {
                // Through z(src, r): datt_src += ds z; the message gradient B gains ds att_src.
                for (int64_t i = 0; i < rows; ++i) {
                  for (int64_t h = 0; h < d.heads; ++h) {
                    const T v = ds[i * d.heads + h];
                    AxpyRow(d.dh, v, zt.data() + i * d.f + h * d.dh, p + kf + h * d.dh);
                    AxpyRow(d.dh, v, sv.att_src + (rel * d.heads + h) * d.dh, bt.data() + i * d.f + h * d.dh);
                  }
                }
              }
              Gemm<T>(Trans::kYes, Trans::kNo, d.k, d.f, rows, T(1), xt.data(), d.k, bt.data(), d.f, T(1), p, d.f);
              if (dx != nullptr) {
                Gemm<T>(Trans::kNo, Trans::kYes, rows, d.k, d.f, T(1), bt.data(), d.f, w_r, d.f, T(0), gx.data(), d.k);
                for (int64_t i = 0; i < rows; ++i) {
                  AddRow(d.k, gx.data() + i * d.k, dx + static_cast<int64_t>(sl.pair_src[u0 + i]) * d.k);
                }
              }
              if (d.reorder) {
                for (int64_t i = 0; i < rows; ++i) {
                  for (int64_t h = 0; h < d.heads; ++h) {
                    const T v = ds[i * d.heads + h];
                    if (dx != nullptr) {
                      AxpyRow(d.k, v, wa_src + (rel * d.heads + h) * d.k,
                              dx + static_cast<int64_t>(sl.pair_src[u0 + i]) * d.k);
                    }
                    AxpyRow(d.k, v, xt.data() + i * d.k, p + kf + h * d.k);
                  }
                }
              }
            }
          }
        }
      }
    });
    args.ParallelFor(d.r, 1, [&](int64_t r0, int64_t r1) {
      std::vector<T> dwa(static_cast<size_t>(hk));
      for (int64_t rel = r0; rel < r1; ++rel) {
        T* dw_r = out.dw + rel * kf;
        T* datt_r = out.datt_src + rel * hd;
        part.AddTo(rel, 0, kf, dw_r);
        Zero(hd, datt_r);
        if (!d.reorder) {
          part.AddTo(rel, kf, hd, datt_r);
          continue;
        }
        Zero(hk, dwa.data());
        part.AddTo(rel, kf, hk, dwa.data());
        for (int64_t j = 0; j < d.k; ++j) {
          for (int64_t h = 0; h < d.heads; ++h) {
            const T v = dwa[static_cast<size_t>(h * d.k + j)];
            AxpyRow(d.dh, v, w + rel * kf + j * d.f + h * d.dh, datt_r + h * d.dh);
            AxpyRow(d.dh, v, sv.att_src + (rel * d.heads + h) * d.dh, dw_r + j * d.f + h * d.dh);
          }
        }
      }
    });
  }
}

// The one-hot backward: z(v, r) is row (r, row_id[v]) of the table, so dz lands on that row of dW. dW is
// zeroed, then B1 writes the destination rows' share (through s_dst), B2 the source rows' (messages and
// s_src); datt from per-group partials.
template <typename T>
void BackwardEmbed(const KernelArgs& args, const RgatDims& d, const RgatLayout& l, const T* dout, const T* table,
                   const int64_t* row_id, const RgatSaved<T>& sv, const WeightGrads<T>& out) {
  const HeadGrad<T> dg(dout, d);
  const Softmax<T> sm{sv.s_src, sv.s_dst, sv.row_max, sv.row_sum, d.heads, static_cast<T>(d.slope)};
  const int64_t hd = d.heads * d.dh;
  Workspace<T> c(args, d.n * d.heads);
  HeadDots(args, d, dg, sv.heads, c.get());
  args.ParallelFor(d.r * d.k, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d.f)),
                   [&](int64_t i0, int64_t i1) { Zero((i1 - i0) * d.f, out.dw + i0 * d.f); });
  const bool distinct = RowIdsDistinct(args, row_id, d.m, d.k);
  auto dz = [&](int64_t pair, int64_t seg, int64_t row, int64_t h, T dalpha) {
    const T raw = sm.Raw(pair, seg, h);
    return sm.Alpha(sm.Score(raw), row, h) * (dalpha - c.get()[row * d.heads + h]) * sm.Slope(raw);
  };
  // Writes datt from the partials of one phase.
  auto finish = [&](const Partials<T>& part, T* datt) {
    args.ParallelFor(d.r, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t rel = r0; rel < r1; ++rel) {
        Zero(hd, datt + rel * hd);
        part.AddTo(rel, 0, hd, datt + rel * hd);
      }
    });
  };
  {  // B1
    const DstLayout& dl = l.d;
    Partials<T> part(args, distinct ? Groups<T>(dl.num_blocks, d.r, hd) : 1, d.r, hd);
    ForGroups(args, part.groups(), dl.num_blocks, [&](int64_t g, int64_t b) {
      std::vector<T> ds(static_cast<size_t>(d.heads));
      for (int64_t q = dl.blk_run[b]; q < dl.blk_run[b + 1]; ++q) {
        const int64_t rel = dl.run_rel[q];
        const T* table_r = table + rel * d.k * d.f;
        T* p = part.Slice(g, rel);
        for (int64_t s = dl.run_seg[q]; s < dl.run_seg[q + 1]; ++s) {
          const int64_t row = dl.seg_dst[s];
          std::fill(ds.begin(), ds.end(), T(0));
          for (int64_t e = dl.seg_edge[s]; e < dl.seg_edge[s + 1]; ++e) {
            if (e + kPrefetchAhead < dl.num_edges)
              PrefetchRow(table_r + row_id[dl.edge_src[e + kPrefetchAhead]] * d.f, d.f);
            const T* z = table_r + row_id[dl.edge_src[e]] * d.f;
            for (int64_t h = 0; h < d.heads; ++h) {
              const T dalpha = dg.scale * DotRow(d.dh, dg.Row(row, h), z + h * d.dh);
              ds[static_cast<size_t>(h)] += dz(l.edge_pair[e], s, row, h, dalpha);
            }
          }
          const T* zd = table_r + row_id[row] * d.f;
          T* dw_row = out.dw + (rel * d.k + row_id[row]) * d.f;
          for (int64_t h = 0; h < d.heads; ++h) {
            const T v = ds[static_cast<size_t>(h)];
            AxpyRow(d.dh, v, zd + h * d.dh, p + h * d.dh);
            AxpyRow(d.dh, v, sv.att_dst + (rel * d.heads + h) * d.dh, dw_row + h * d.dh);
          }
        }
      }
    });
    finish(part, out.datt_dst);
  }
  {  // B2
    const SrcLayout& sl = l.s;
    Partials<T> part(args, distinct ? Groups<T>(sl.num_blocks, d.r, hd) : 1, d.r, hd);
    ForGroups(args, part.groups(), sl.num_blocks, [&](int64_t g, int64_t cb) {
      std::vector<T> ds(static_cast<size_t>(d.heads));
      for (int64_t pr = sl.blk_run[cb]; pr < sl.blk_run[cb + 1]; ++pr) {
        const int64_t rel = sl.run_rel[pr];
        T* p = part.Slice(g, rel);
        for (int64_t u = sl.run_pair[pr]; u < sl.run_pair[pr + 1]; ++u) {
          const int64_t id = row_id[sl.pair_src[u]];
          const T* z = table + (rel * d.k + id) * d.f;
          T* dw_row = out.dw + (rel * d.k + id) * d.f;
          std::fill(ds.begin(), ds.end(), T(0));
          for (int64_t e = sl.pair_edge[u]; e < sl.pair_edge[u + 1]; ++e) {
            if (e + kPrefetchAhead < sl.num_edges)
              PrefetchRow(dg.Row(l.d.seg_dst[sl.edge_seg[e + kPrefetchAhead]], 0), d.o);
            const int64_t seg = sl.edge_seg[e], row = l.d.seg_dst[seg];
            for (int64_t h = 0; h < d.heads; ++h) {
              const T* gh = dg.Row(row, h);
              const T alpha = sm.Alpha(sm.Score(sm.Raw(u, seg, h)), row, h);
              AxpyRow(d.dh, alpha * dg.scale, gh, dw_row + h * d.dh);
              ds[static_cast<size_t>(h)] += dz(u, seg, row, h, dg.scale * DotRow(d.dh, gh, z + h * d.dh));
            }
          }
          for (int64_t h = 0; h < d.heads; ++h) {
            const T v = ds[static_cast<size_t>(h)];
            AxpyRow(d.dh, v, z + h * d.dh, p + h * d.dh);
            AxpyRow(d.dh, v, sv.att_src + (rel * d.heads + h) * d.dh, dw_row + h * d.dh);
          }
        }
      }
    });
    finish(part, out.datt_src);
  }
}

struct RgatBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const RgatBackwardArgs<T>& a) {
    BackwardFeatures(args, a.d, a.l, a.dout, a.x, a.w, a.sv, a.dx, WeightGrads<T>{a.dw, a.datt_src, a.datt_dst});
  }
};

struct RgatEmbedBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const RgatBackwardArgs<T>& a) {
    BackwardEmbed(args, a.d, a.l, a.dout, a.w, a.row_id, a.sv, WeightGrads<T>{a.dw, a.datt_src, a.datt_dst});
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(RgatBwdCpu, RgatBwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(RgatEmbedBwdCpu, RgatEmbedBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn

// Pieces of the fused RGAT layer on CPU that its forward (rgat_fwd_cpu.cc) and backward (rgat_bwd_cpu.cc)
// share: the softmax over the edges into a row, from the per-item logits and the row statistics, and the
// reordered attention vectors W_{r,h} att[r, h].
// Thread safety: plain views and pure functions over caller-owned memory.
#pragma once

#include <cmath>
#include <cstdint>

#include "rgat_args.h"
#include "row_ops.h"

namespace tessel::kernels::rgnn::rgat_cpu {

// The softmax of one head over the edges into a row, from the per-item logits and the row statistics.
template <typename T>
struct Softmax {
  const T* s_src;    // [U, H]
  const T* s_dst;    // [S, H]
  const T* row_max;  // [N, H]
  const T* row_sum;  // [N, H]
  int64_t heads;
  T slope;
  T Raw(int64_t pair, int64_t seg, int64_t h) const { return s_src[pair * heads + h] + s_dst[seg * heads + h]; }
  T Score(T raw) const { return raw > T(0) ? raw : slope * raw; }
  // d score / d raw
  T Slope(T raw) const { return raw > T(0) ? T(1) : slope; }
  T Alpha(T score, int64_t row, int64_t h) const {
    return std::exp(score - row_max[row * heads + h]) / row_sum[row * heads + h];
  }
};

// wa[r, h, :] = W_{r,h} att[r, h] (a K-vector per relation and head), so that att[r,h] . (x W_r)_h is
// x . wa[r, h, :]: the reordered attention logits.
template <typename T>
void ProjectAttention(const KernelArgs& args, const RgatDims& d, const T* w, const T* att, T* wa) {
  args.ParallelFor(d.r, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t rel = r0; rel < r1; ++rel) {
      for (int64_t h = 0; h < d.heads; ++h) {
        const T* a = att + (rel * d.heads + h) * d.dh;
        T* out = wa + (rel * d.heads + h) * d.k;
        for (int64_t j = 0; j < d.k; ++j) out[j] = DotRow(d.dh, w + (rel * d.k + j) * d.f + h * d.dh, a);
      }
    }
  });
}

}  // namespace tessel::kernels::rgnn::rgat_cpu

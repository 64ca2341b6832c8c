// Device-side pieces of the fused RGAT layer on CUDA that its forward (rgat_fwd.cu) and backward
// (rgat_bwd.cu) share: the softmax over the edges into a row, recomputed from the per-item logits and the
// row statistics, and the reordered attention vectors W_{r,h} att[r, h]. Include from .cu files only.
#pragma once

#include <cstdint>

#include "fused_cuda.cuh"

namespace tessel::kernels::rgnn::rgat_cuda {

// Columns per lane held in registers by the warp loops over a row (128 per pass of a warp).
constexpr int kVec = 4;

// The softmax of one head over the edges into a row, from the per-item logits and the row statistics.
template <typename T>
struct Attention {
  const T* s_src;    // [U, H]
  const T* s_dst;    // [S, H]
  const T* row_max;  // [N, H]
  const T* row_sum;  // [N, H]
  int64_t heads;
  T slope;
  __device__ T Raw(int64_t pair, int64_t seg, int64_t h) const {
    return s_src[pair * heads + h] + s_dst[seg * heads + h];
  }
  __device__ T Score(T raw) const { return raw > T(0) ? raw : slope * raw; }
  // d score / d raw
  __device__ T Slope(T raw) const { return raw > T(0) ? T(1) : slope; }
  __device__ T Alpha(int64_t pair, int64_t seg, int64_t row, int64_t h) const {
    return fused_cuda::Exp(Score(Raw(pair, seg, h)) - row_max[row * heads + h]) / row_sum[row * heads + h];
  }
  // d L / d raw of one edge: alpha (dalpha - c[row, h]) LeakyReLU'(raw).
  __device__ T Dz(int64_t pair, int64_t seg, int64_t row, int64_t h, T dalpha, const T* c) const {
    const T raw = Raw(pair, seg, h);
    const T alpha = fused_cuda::Exp(Score(raw) - row_max[row * heads + h]) / row_sum[row * heads + h];
    return alpha * (dalpha - c[row * heads + h]) * Slope(raw);
  }
};

// wa[r, h, j] = sum_c W[r, j, h Dh + c] att[r, h, c]: att[r,h] . (x W_r)_h = x . wa[r, h].
template <typename T>
__global__ void ProjectAttentionKernel(const T* w, const T* att, int64_t r, int64_t k, int64_t heads, int64_t dh,
                                       T* wa) {
  const int64_t f = heads * dh;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < r * heads * k;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % k, rh = i / k, rel = rh / heads, h = rh % heads;
    const T* wr = w + (rel * k + j) * f + h * dh;
    const T* a = att + rh * dh;
    T acc = T(0);
    for (int64_t c = 0; c < dh; ++c) acc += wr[c] * a[c];
    wa[i] = acc;
  }
}

}  // namespace tessel::kernels::rgnn::rgat_cuda

// llm.attention.fwd/.bwd in bf16 on the tensor cores (wmma, 16 x 16 x 16 bf16 products summed in f32):
// the tiling and the two deterministic backward passes of attention.cu (read its header for the
// algorithm), with each tile product on the tensor cores instead of CUDA cores. A block is 4 warps over a
// tile of 64 queries (forward, query pass) or 64 keys (key pass); warp w owns the tile's rows
// [16 w, 16 w + 16) and every product's rows there, so a warp needs only __syncwarp between its steps.
// The element-wise steps (masking, the online softmax, P and dS) run 2 lanes to a row, 32 columns each.
// Rounding, as FlashAttention-2 and PyTorch do it and as the CPU reference (attention_cpu.cc) does it:
//  - q, k, v, dY are bf16 already; every product sums in f32;
//  - the probabilities P and dS are computed in f32 and rounded to bf16 only as operands of the next
//    product (P V, P^T dY, dS K, dS^T Q); the row sums l and D, lse and dS itself use the f32 values;
//  - Y and dqkv are rounded once as they are stored.
// Shared memory holds bf16 tiles [64][hsp + 8] (hsp: hs rounded up to 16, the columns past hs zero; the
// 8 more keep rows 16-byte aligned and off each other's banks), score tiles in f32 [64][68], and the
// forward's accumulator O in f32 [64][hsp + 4], which the warp rescales row by row (a wmma accumulator's
// layout is opaque) before it adds P V into it. The backward's accumulators (dQ; dK and dV) stay in wmma
// fragments for the whole pass. Every sum runs in a fixed order: the results do not depend on scheduling.
// Loads from global memory are 16-byte vectors where hs is a multiple of 8 and the tensors are 16-byte
// aligned (GPT-2's shapes), else element by element; both coalesced.
#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "attention_tc.h"
#include "attention_tiles.cuh"

namespace tessel::kernels::llm {
namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kTile = 64;           // queries and keys per tile
constexpr int kWarps = kTile / 16;  // a warp per 16 rows
constexpr int kThreads = 32 * kWarps;
constexpr int kScoreLd = kTile + 4;  // f32 score tiles
constexpr int kProbLd = kTile + 8;   // bf16 P and dS tiles
// The backward stages its f32 results, kTile x (hsp + 4), where its two f32 score tiles were.
static_assert(kTile * ((kMaxHeadSize + 15) / 16 * 16 + 4) <= 2 * kTile * kScoreLd,
              "a tile of f32 results at the largest head size must fit in the two score tiles");

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBt = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;  // a row-major tile, transposed
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// The shapes of the shared tiles: hsp = hs rounded up to 16.
struct TcLayout {
  int hs, hsp, ldh, ldo;
  explicit TcLayout(int64_t head) : hs(static_cast<int>(head)), hsp((hs + 15) / 16 * 16), ldh(hsp + 8), ldo(hsp + 4) {}
  size_t RowTile() const { return size_t{kTile} * ldh * sizeof(bf16); }
  size_t ProbTile() const { return size_t{kTile} * kProbLd * sizeof(bf16); }
  size_t ScoreTile() const { return size_t{kTile} * kScoreLd * sizeof(float); }
  size_t OutTile() const { return size_t{kTile} * ldo * sizeof(float); }
};

__device__ inline bf16 FromBits(uint16_t bits) {
  __nv_bfloat16_raw raw;
  raw.x = bits;
  return bf16(raw);
}

__device__ inline Bf16 ToBits(float x) {
  const __nv_bfloat16_raw raw = __float2bfloat16_rn(x);
  return Bf16{raw.x};
}

// Copies the `valid` rows of a tile (row r at src + r * stride, hs wide) to dst [kTile][ld], with zeros in
// the rows after them and in the columns [hs, hsp). `vec`: 16-byte loads (hs % 8 == 0, src and stride
// 16-byte aligned). The caller synchronises before the tile is read.
__device__ void StageRows(const Bf16* src, int64_t stride, int valid, const TcLayout& t, bool vec, bf16* dst) {
  if (vec) {
    const int chunks = t.hs / 8;
    for (int idx = threadIdx.x; idx < kTile * chunks; idx += blockDim.x) {
      const int r = idx / chunks, d = (idx - r * chunks) * 8;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r < valid) v = *reinterpret_cast<const uint4*>(src + r * stride + d);
      *reinterpret_cast<uint4*>(dst + r * t.ldh + d) = v;
    }
    for (int idx = threadIdx.x; idx < kTile * (t.hsp - t.hs); idx += blockDim.x) {
      const int r = idx / (t.hsp - t.hs), d = t.hs + idx % (t.hsp - t.hs);
      dst[r * t.ldh + d] = FromBits(0);
    }
    return;
  }
  for (int idx = threadIdx.x; idx < kTile * t.hsp; idx += blockDim.x) {
    const int r = idx / t.hsp, d = idx - r * t.hsp;
    dst[r * t.ldh + d] = FromBits(r < valid && d < t.hs ? src[r * stride + d].bits : uint16_t{0});
  }
}

// out[16 rows][64] (ld kScoreLd) = a[16 rows][hsp] b[64 rows][hsp]^T: a warp's 16 rows of a score tile.
__device__ void ScoreRows(const bf16* a, const bf16* b, const TcLayout& t, float* out) {
  FragC acc[kTile / 16];
#pragma unroll
  for (int n = 0; n < kTile / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
  for (int kk = 0; kk < t.hsp; kk += 16) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + kk, t.ldh);
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n) {
      FragBt fb;
      wmma::load_matrix_sync(fb, b + n * 16 * t.ldh + kk, t.ldh);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
#pragma unroll
  for (int n = 0; n < kTile / 16; ++n) wmma::store_matrix_sync(out + n * 16, acc[n], kScoreLd, wmma::mem_row_major);
}

// acc[n] += p[16 rows][64] (ld kProbLd) x[64 rows][hsp]: the columns [16 n, 16 n + 16) of a warp's rows.
template <int kFrags>
__device__ void AddProductRows(const bf16* p, const bf16* x, const TcLayout& t, FragC (&acc)[kFrags]) {
#pragma unroll
  for (int kk = 0; kk < kTile; kk += 16) {
    FragA fa;
    wmma::load_matrix_sync(fa, p + kk, kProbLd);
#pragma unroll
    for (int n = 0; n < kFrags; ++n) {
      if (n * 16 < t.hsp) {
        FragB fb;
        wmma::load_matrix_sync(fb, x + kk * t.ldh + n * 16, t.ldh);
        wmma::mma_sync(acc[n], fa, fb, acc[n]);
      }
    }
  }
}

// Stores rows [0, valid) x columns [0, hs) of out [kTile][ldo] (f32), each times its row's factor
// (row_factor, or `factor` where it is null), rounded to bf16, to dst (rows `stride` apart); block-wide,
// consecutive threads on consecutive columns.
__device__ void StoreRows(const float* out, const TcLayout& t, int valid, const float* row_factor, float factor,
                          Bf16* dst, int64_t stride) {
  for (int idx = threadIdx.x; idx < valid * t.hs; idx += blockDim.x) {
    const int r = idx / t.hs, d = idx - r * t.hs;
    dst[r * stride + d] = ToBits(out[r * t.ldo + d] * (row_factor != nullptr ? row_factor[r] : factor));
  }
}

// Forward. Block = (b, h, query tile i). Shared: Q_i, K_j, V_j (bf16 rows); P (bf16); S (f32); O (f32);
// 1 / l by row.
__global__ void __launch_bounds__(kThreads)
    AttentionFwdTcKernel(const Bf16* qkv, Dims dm, TcLayout t, float scale, bool vec, Bf16* y, float* lse) {
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  bf16* sq = reinterpret_cast<bf16*>(shared_bytes);
  bf16* sk = sq + kTile * t.ldh;
  bf16* sv = sk + kTile * t.ldh;
  bf16* sp = sv + kTile * t.ldh;
  float* ss = reinterpret_cast<float*>(sp + kTile * kProbLd);
  float* so = ss + kTile * kScoreLd;
  float* sinv = so + kTile * t.ldo;
  const BlockTile tile = TileOfBlock<kTile>(dm);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = warp * 16 + lane / 2, c0 = lane % 2 * (kTile / 2);  // this lane's row and its 32 columns
  const int64_t i = tile.t0 + row;                                    // its query (maybe past the sequence)
  const int o0 = lane % 2 * (t.hsp / 2);                              // its half of O's row
  const Bf16* base = qkv + tile.bi * dm.s * dm.q + tile.hi * dm.hs;   // q of (b, 0, h); k at +c, v at +2c
  StageRows(base + tile.t0 * dm.q, dm.q, tile.count, t, vec, sq);
  float m = -INFINITY, l = 0.0f;
  for (int64_t j0 = 0; j0 <= tile.t0; j0 += kTile) {  // key tiles up to the diagonal one
    const int cols = static_cast<int>(dm.s - j0 < kTile ? dm.s - j0 : kTile);
    __syncthreads();  // every warp is done with the previous K_j and V_j
    StageRows(base + j0 * dm.q + dm.c, dm.q, cols, t, vec, sk);
    StageRows(base + j0 * dm.q + 2 * dm.c, dm.q, cols, t, vec, sv);
    __syncthreads();
    ScoreRows(sq + warp * 16 * t.ldh, sk, t, ss + warp * 16 * kScoreLd);
    __syncwarp();
    float* s_row = ss + row * kScoreLd;
    float tile_max = -INFINITY;
    for (int c = c0; c < c0 + kTile / 2; ++c) {
      const int64_t j = j0 + c;
      s_row[c] = j <= i && j < dm.s ? scale * s_row[c] : -INFINITY;
      tile_max = fmaxf(tile_max, s_row[c]);
    }
    // Key j0 <= i is in every row's view, so m_new is finite; on the first tile m = -inf and alpha = 0.
    const float m_new = fmaxf(m, fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1)));
    const float alpha = expf(m - m_new);
    float tile_sum = 0.0f;
    for (int c = c0; c < c0 + kTile / 2; ++c) {
      const float p = s_row[c] == -INFINITY ? 0.0f : expf(s_row[c] - m_new);
      tile_sum += p;
      sp[row * kProbLd + c] = __float2bfloat16_rn(p);
    }
    l = alpha * l + (tile_sum + __shfl_xor_sync(0xffffffffu, tile_sum, 1));
    m = m_new;
    float* o_row = so + row * t.ldo;
    for (int d = o0; d < o0 + t.hsp / 2; ++d) o_row[d] = j0 == 0 ? 0.0f : o_row[d] * alpha;
    __syncwarp();  // the warp's rows of P and O are written
    for (int n = 0; n * 16 < t.hsp; ++n) {
      FragC acc;
      float* o_frag = so + warp * 16 * t.ldo + n * 16;
      wmma::load_matrix_sync(acc, o_frag, t.ldo, wmma::mem_row_major);
      for (int kk = 0; kk < kTile; kk += 16) {
        FragA fa;
        FragB fb;
        wmma::load_matrix_sync(fa, sp + warp * 16 * kProbLd + kk, kProbLd);
        wmma::load_matrix_sync(fb, sv + kk * t.ldh + n * 16, t.ldh);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(o_frag, acc, t.ldo, wmma::mem_row_major);
    }
    __syncwarp();  // O's rows are stored before the next tile rescales them
  }
  if (lane % 2 == 0) {
    sinv[row] = 1.0f / l;
    if (row < tile.count) lse[(tile.bi * dm.h + tile.hi) * dm.s + i] = m + logf(l);
  }
  __syncthreads();
  StoreRows(so, t, tile.count, sinv, 1.0f, y + (tile.bi * dm.s + tile.t0) * dm.c + tile.hi * dm.hs, dm.c);
}

// The query pass. Block = (b, h, query tile i). Shared: Q_i, dY_i, K_j (Y_i before the first key tile),
// V_j (bf16 rows); dS (bf16); S and dP (f32, contiguous: dQ_i's staging at the end). dQ_i in fragments.
template <int kFrags>
__global__ void __launch_bounds__(kThreads)
    AttentionBwdQueryTcKernel(const Bf16* dy, const Bf16* qkv, const Bf16* y, const float* lse, Dims dm, TcLayout t,
                              float scale, bool vec, Bf16* dqkv, float* dvec) {
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  bf16* sq = reinterpret_cast<bf16*>(shared_bytes);
  bf16* sdy = sq + kTile * t.ldh;
  bf16* sk = sdy + kTile * t.ldh;
  bf16* sv = sk + kTile * t.ldh;
  bf16* sds = sv + kTile * t.ldh;
  float* ss = reinterpret_cast<float*>(sds + kTile * kProbLd);
  float* sdp = ss + kTile * kScoreLd;
  const BlockTile tile = TileOfBlock<kTile>(dm);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = warp * 16 + lane / 2, c0 = lane % 2 * (kTile / 2);
  const int64_t i = tile.t0 + row;
  const Bf16* base = qkv + tile.bi * dm.s * dm.q + tile.hi * dm.hs;
  const int64_t y_tile = (tile.bi * dm.s + tile.t0) * dm.c + tile.hi * dm.hs;  // dY_i and Y_i
  StageRows(base + tile.t0 * dm.q, dm.q, tile.count, t, vec, sq);
  StageRows(dy + y_tile, dm.c, tile.count, t, vec, sdy);
  StageRows(y + y_tile, dm.c, tile.count, t, vec, sk);
  __syncthreads();
  // D_i = dY_i . Y_i in f32, each lane half of the row, then the pair's sum (the same bits in both).
  float dot = 0.0f;
  for (int d = lane % 2 * (t.hsp / 2); d < (lane % 2 + 1) * (t.hsp / 2); ++d) {
    dot += __bfloat162float(sdy[row * t.ldh + d]) * __bfloat162float(sk[row * t.ldh + d]);
  }
  const float big_d = dot + __shfl_xor_sync(0xffffffffu, dot, 1);
  const int64_t at = (tile.bi * dm.h + tile.hi) * dm.s + i;  // of lse and D
  const float row_lse = row < tile.count ? lse[at] : 0.0f;
  if (lane % 2 == 0 && row < tile.count) dvec[at] = big_d;
  FragC dq[kFrags];
#pragma unroll
  for (int n = 0; n < kFrags; ++n) wmma::fill_fragment(dq[n], 0.0f);
  for (int64_t j0 = 0; j0 <= tile.t0; j0 += kTile) {
    const int cols = static_cast<int>(dm.s - j0 < kTile ? dm.s - j0 : kTile);
    __syncthreads();  // Y_i (before the first key tile), or the previous K_j and V_j, are read
    StageRows(base + j0 * dm.q + dm.c, dm.q, cols, t, vec, sk);
    StageRows(base + j0 * dm.q + 2 * dm.c, dm.q, cols, t, vec, sv);
    __syncthreads();
    ScoreRows(sq + warp * 16 * t.ldh, sk, t, ss + warp * 16 * kScoreLd);
    ScoreRows(sdy + warp * 16 * t.ldh, sv, t, sdp + warp * 16 * kScoreLd);
    __syncwarp();
    for (int c = c0; c < c0 + kTile / 2; ++c) {
      const int64_t j = j0 + c;
      const float p = j <= i && j < dm.s ? expf(scale * ss[row * kScoreLd + c] - row_lse) : 0.0f;
      sds[row * kProbLd + c] = __float2bfloat16_rn(p * (sdp[row * kScoreLd + c] - big_d));
    }
    __syncwarp();  // the warp's rows of dS are written
    AddProductRows<kFrags>(sds + warp * 16 * kProbLd, sk, t, dq);
  }
  __syncthreads();  // every warp is done with S and dP: dQ_i is staged there (kTile x ldo fits in both)
  float* out = ss;
#pragma unroll
  for (int n = 0; n < kFrags; ++n) {
    if (n * 16 < t.hsp) wmma::store_matrix_sync(out + warp * 16 * t.ldo + n * 16, dq[n], t.ldo, wmma::mem_row_major);
  }
  __syncthreads();
  StoreRows(out, t, tile.count, nullptr, scale, dqkv + (tile.bi * dm.s + tile.t0) * dm.q + tile.hi * dm.hs, dm.q);
}

// The key pass. Block = (b, h, key tile j). Shared: K_j, V_j, Q_i, dY_i (bf16 rows); P^T and dS^T (bf16,
// [key][query]); S^T and dP^T (f32, contiguous: dK_j's and dV_j's staging at the end); lse_i and D_i.
// dK_j and dV_j in fragments.
template <int kFrags>
__global__ void __launch_bounds__(kThreads)
    AttentionBwdKeyTcKernel(const Bf16* dy, const Bf16* qkv, const float* lse, const float* dvec, Dims dm, TcLayout t,
                            float scale, bool vec, Bf16* dqkv) {
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  bf16* sk = reinterpret_cast<bf16*>(shared_bytes);
  bf16* sv = sk + kTile * t.ldh;
  bf16* sq = sv + kTile * t.ldh;
  bf16* sdy = sq + kTile * t.ldh;
  bf16* sp = sdy + kTile * t.ldh;
  bf16* sds = sp + kTile * kProbLd;
  float* ss = reinterpret_cast<float*>(sds + kTile * kProbLd);
  float* sdp = ss + kTile * kScoreLd;
  float* slse = sdp + kTile * kScoreLd;
  float* sd = slse + kTile;
  const BlockTile tile = TileOfBlock<kTile>(dm);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = warp * 16 + lane / 2, c0 = lane % 2 * (kTile / 2);  // this lane's key row, its 32 queries
  const int64_t j = tile.t0 + row;
  const Bf16* base = qkv + tile.bi * dm.s * dm.q + tile.hi * dm.hs;
  const Bf16* dy_seq = dy + tile.bi * dm.s * dm.c + tile.hi * dm.hs;
  const int64_t seq = (tile.bi * dm.h + tile.hi) * dm.s;  // of lse and D
  StageRows(base + tile.t0 * dm.q + dm.c, dm.q, tile.count, t, vec, sk);
  StageRows(base + tile.t0 * dm.q + 2 * dm.c, dm.q, tile.count, t, vec, sv);
  FragC dk[kFrags], dv[kFrags];
#pragma unroll
  for (int n = 0; n < kFrags; ++n) {
    wmma::fill_fragment(dk[n], 0.0f);
    wmma::fill_fragment(dv[n], 0.0f);
  }
  for (int64_t i0 = tile.t0; i0 < dm.s; i0 += kTile) {  // query tiles from the diagonal one
    const int rows = static_cast<int>(dm.s - i0 < kTile ? dm.s - i0 : kTile);
    __syncthreads();  // every warp is done with the previous Q_i, dY_i, lse_i and D_i
    StageRows(base + i0 * dm.q, dm.q, rows, t, vec, sq);
    StageRows(dy_seq + i0 * dm.c, dm.c, rows, t, vec, sdy);
    for (int u = threadIdx.x; u < kTile; u += blockDim.x) {
      slse[u] = u < rows ? lse[seq + i0 + u] : 0.0f;
      sd[u] = u < rows ? dvec[seq + i0 + u] : 0.0f;
    }
    __syncthreads();
    ScoreRows(sk + warp * 16 * t.ldh, sq, t, ss + warp * 16 * kScoreLd);    // S^T = K_j Q_i^T
    ScoreRows(sv + warp * 16 * t.ldh, sdy, t, sdp + warp * 16 * kScoreLd);  // dP^T = V_j dY_i^T
    __syncwarp();
    for (int c = c0; c < c0 + kTile / 2; ++c) {
      const int64_t query = i0 + c;
      const float p = j <= query && query < dm.s && j < dm.s ? expf(scale * ss[row * kScoreLd + c] - slse[c]) : 0.0f;
      sp[row * kProbLd + c] = __float2bfloat16_rn(p);
      sds[row * kProbLd + c] = __float2bfloat16_rn(p * (sdp[row * kScoreLd + c] - sd[c]));
    }
    __syncwarp();                                                  // the warp's rows of P^T and dS^T are written
    AddProductRows<kFrags>(sp + warp * 16 * kProbLd, sdy, t, dv);  // dV_j += P^T dY_i
    AddProductRows<kFrags>(sds + warp * 16 * kProbLd, sq, t, dk);  // dK_j += dS^T Q_i
  }
  Bf16* out_rows = dqkv + (tile.bi * dm.s + tile.t0) * dm.q + tile.hi * dm.hs;
  float* out = ss;                         // kTile x ldo fits in S^T and dP^T
  for (int part = 1; part <= 2; ++part) {  // dK_j (scaled), then dV_j
    __syncthreads();                       // every warp is done with S^T and dP^T, or the block with dK_j's staging
#pragma unroll
    for (int n = 0; n < kFrags; ++n) {
      if (n * 16 < t.hsp) {
        wmma::store_matrix_sync(out + warp * 16 * t.ldo + n * 16, part == 1 ? dk[n] : dv[n], t.ldo,
                                wmma::mem_row_major);
      }
    }
    __syncthreads();
    StoreRows(out, t, tile.count, nullptr, part == 1 ? scale : 1.0f, out_rows + part * dm.c, dm.q);
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// 16-byte loads (of the tensors read; stores go element by element): every row of every tile starts
// 16-byte aligned.
bool Vectorisable(const AttentionShape& a, std::initializer_list<const void*> tensors) {
  if (a.hs % 8 != 0 || a.c % 8 != 0 || a.q % 8 != 0) return false;
  for (const void* p : tensors) {
    if (!Aligned16(p)) return false;
  }
  return true;
}

// Calls f(std::integral_constant<int, kFrags>), kFrags = the 16-column fragments of a row: 4 up to
// hs = 64 (GPT-2's), else 8.
template <typename F>
void DispatchFrags(const TcLayout& t, F&& f) {
  if (t.hsp <= 64) {
    f(std::integral_constant<int, 4>());
  } else {
    f(std::integral_constant<int, kMaxHeadSize / 16>());
  }
}

}  // namespace

void AttentionFwdTensorCores(const KernelArgs& args, const AttentionFwdArgs<Bf16>& a) {
  CheckHeadSize(args, a.shape.hs);  // even if B S = 0
  if (a.shape.b * a.shape.s == 0) return;
  const TcLayout t(a.shape.hs);
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.shape.hs));
  // Q, K, V; P; S; O; 1 / l.
  const size_t shared = 3 * t.RowTile() + t.ProbTile() + t.ScoreTile() + t.OutTile() + kTile * sizeof(float);
  AllowSharedMemory(AttentionFwdTcKernel, shared);
  AttentionFwdTcKernel<<<TileBlocks<kTile>(a.shape), kThreads, shared, StreamOf(args)>>>(
      a.qkv, DimsOf(a.shape), t, scale, Vectorisable(a.shape, {a.qkv}), a.y, a.lse);
  CheckLaunch("AttentionFwdTcKernel");
}

void AttentionBwdTensorCores(const KernelArgs& args, const AttentionBwdArgs<Bf16>& a) {
  CheckHeadSize(args, a.shape.hs);
  if (a.shape.b * a.shape.s == 0) return;
  const TcLayout t(a.shape.hs);
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.shape.hs));
  const bool vec = Vectorisable(a.shape, {a.dy, a.qkv, a.y});
  cudaStream_t stream = StreamOf(args);
  Workspace<float> dvec(args, a.shape.b * a.shape.h * a.shape.s);
  DispatchFrags(t, [&](auto frags) {
    constexpr int kFrags = decltype(frags)::value;
    const auto query_kernel = AttentionBwdQueryTcKernel<kFrags>;
    const size_t query_shared = 4 * t.RowTile() + t.ProbTile() + 2 * t.ScoreTile();  // Q, dY, K, V; dS; S, dP
    AllowSharedMemory(query_kernel, query_shared);
    query_kernel<<<TileBlocks<kTile>(a.shape), kThreads, query_shared, stream>>>(
        a.dy, a.qkv, a.y, a.lse, DimsOf(a.shape), t, scale, vec, a.dqkv, dvec.get());
    CheckLaunch("AttentionBwdQueryTcKernel");
    const auto key_kernel = AttentionBwdKeyTcKernel<kFrags>;
    // K, V, Q, dY; P, dS; S, dP; lse, D.
    const size_t key_shared = 4 * t.RowTile() + 2 * t.ProbTile() + 2 * t.ScoreTile() + 2 * kTile * sizeof(float);
    AllowSharedMemory(key_kernel, key_shared);
    key_kernel<<<TileBlocks<kTile>(a.shape), kThreads, key_shared, stream>>>(a.dy, a.qkv, a.lse, dvec.get(),
                                                                             DimsOf(a.shape), t, scale, vec, a.dqkv);
    CheckLaunch("AttentionBwdKeyTcKernel");
  });
}

}  // namespace tessel::kernels::llm

// What the fused CUDA kernels (rgcn_fused.cu, rgat_fwd.cu, rgat_bwd.cu, hgt.cu) share: the walk over a
// layout side's items (segments or pairs) in relation order, chunk by chunk (Sweep: one host sync reads
// the runs, a counting sort orders them by relation, a second sync uploads the order; per chunk a kernel
// maps its rows to items and relations by binary search over the runs), row gathers and atomic scatters
// through that mapping, warp helpers (lanes, sums, dot products) and an atomic max with the CPU kernels'
// comparison.
// Thread safety: a Sweep belongs to one call and its stream; the rest are pure functions and kernels over
// caller-owned memory. Scratch comes from the call's workspace (Workspace<T>), never from cudaMalloc.
// Include from .cu files only. Everything here is inline, a template or static, so that the .cu files of
// one library may all include it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_support.h"
#include "kernel_support.h"
#include "segment_layout.h"

namespace tessel::kernels::rgnn::fused_cuda {

// ---------------------------------------------------------------------------------------------------
// Chunk sizes.

inline constexpr int64_t kMaxChunkRows = 65536;
inline constexpr int64_t kMinChunkRows = 1024;
inline constexpr int64_t kChunkBytes = int64_t{96} << 20;  // all of a sweep's tiles together

// Rows per chunk when each chunk row takes `row_elems` values of T, within `budget_bytes`: between
// kMinChunkRows and kMaxChunkRows, but no more than the items (and at least 1).
template <typename T>
int64_t ChunkRows(int64_t items, int64_t row_elems, int64_t budget_bytes = kChunkBytes) {
  const int64_t by_bytes = budget_bytes / (static_cast<int64_t>(sizeof(T)) * std::max<int64_t>(1, row_elems));
  return std::max<int64_t>(1, std::min(items, std::clamp<int64_t>(by_bytes, kMinChunkRows, kMaxChunkRows)));
}

// ---------------------------------------------------------------------------------------------------
// Warps and atomics.

inline constexpr int kWarp = 32;
inline constexpr unsigned kFullMask = 0xffffffffu;

// Blocks for a grid-stride loop with one warp per item.
inline unsigned WarpBlocks(int64_t items) { return Blocks(items * kWarp); }
__device__ inline int64_t GlobalWarp() { return (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kWarp; }
__device__ inline int64_t WarpStride() { return int64_t(gridDim.x) * blockDim.x / kWarp; }
__device__ inline int Lane() { return static_cast<int>(threadIdx.x % kWarp); }

// The sum over the warp, the same bits on every lane (reduced to lane 0, then broadcast).
template <typename T>
__device__ T WarpSum(T v) {
  for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_down_sync(kFullMask, v, off);
  return __shfl_sync(kFullMask, v, 0);
}

// a . b over n values, lanes striding the columns. Every lane of the warp must call it.
template <typename T>
__device__ T WarpDot(int64_t n, const T* a, const T* b) {
  T acc = T(0);
  for (int64_t c = Lane(); c < n; c += kWarp) acc += a[c] * b[c];
  return WarpSum(acc);
}

__device__ inline float Exp(float v) { return expf(v); }
__device__ inline double Exp(double v) { return exp(v); }

// *p = v unless v <= *p, atomically (the CPU kernels' `if (!(v <= mx)) mx = v`).
__device__ inline void AtomicMax(float* p, float v) {
  unsigned int* a = reinterpret_cast<unsigned int*>(p);
  unsigned int old = *reinterpret_cast<volatile unsigned int*>(a);
  while (!(v <= __uint_as_float(old))) {
    const unsigned int assumed = old;
    old = atomicCAS(a, assumed, __float_as_uint(v));
    if (old == assumed) break;
  }
}
__device__ inline void AtomicMax(double* p, double v) {
  unsigned long long* a = reinterpret_cast<unsigned long long*>(p);
  unsigned long long old = *reinterpret_cast<volatile unsigned long long*>(a);
  while (!(v <= __longlong_as_double(static_cast<long long>(old)))) {
    const unsigned long long assumed = old;
    old = atomicCAS(a, assumed, static_cast<unsigned long long>(__double_as_longlong(v)));
    if (old == assumed) break;
  }
}

// ---------------------------------------------------------------------------------------------------
// Items in relation order.

// The q < num_runs with ptr[q] <= item < ptr[q + 1], for ptr[0] <= item < ptr[num_runs]; the last such q,
// so empty runs are passed over.
__device__ inline int64_t RunOf(const int64_t* ptr, int64_t num_runs, int64_t item) {
  int64_t lo = 0, hi = num_runs;  // invariant: ptr[lo] <= item < ptr[hi]
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (ptr[mid] <= item) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// One side of the layout: runs of one relation -> items (segments or pairs) -> edges.
struct Side {
  int64_t num_items = 0, num_runs = 0;
  const int64_t* run_item = nullptr;  // [Q+1]
  const int32_t* run_rel = nullptr;   // [Q]
  const int32_t* item_row = nullptr;  // [items]: seg_dst or pair_src
};
inline Side DstSide(const DstLayout& l) { return Side{l.num_segs, l.num_runs, l.run_seg, l.run_rel, l.seg_dst}; }
inline Side SrcSide(const SrcLayout& l) { return Side{l.num_pairs, l.num_runs, l.run_pair, l.run_rel, l.pair_src}; }

// The items of a side in relation order: the nonempty runs sorted by relation (stably, so by run within a
// relation), each run's items kept in order. rel_start[r] is the first position of relation r's items
// ([R + 1]); plan holds runs[J], the sorted runs, then pos[J + 1], their first positions (pos[J] = the
// number of items), for the device.
struct RelationOrder {
  std::vector<int64_t> rel_start;
  int64_t num_runs = 0;  // J
  std::vector<int64_t> plan;
};

// Reads run_item[Q + 1] and run_rel[Q] to the host (one sync) and sorts the runs. `name` ("dst" or "src")
// names the side in errors.
inline RelationOrder OrderByRelation(const Side& side, int64_t r, const char* name, cudaStream_t stream) {
  const int64_t num_runs = side.num_runs;
  std::vector<int64_t> run_item(static_cast<size_t>(num_runs + 1));
  std::vector<int32_t> run_rel(static_cast<size_t>(num_runs));
  CheckCuda(cudaMemcpyAsync(run_item.data(), side.run_item, run_item.size() * sizeof(int64_t), cudaMemcpyDeviceToHost,
                            stream),
            "copy run offsets to host");
  if (num_runs > 0) {
    CheckCuda(
        cudaMemcpyAsync(run_rel.data(), side.run_rel, run_rel.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream),
        "copy run relations to host");
  }
  CheckCuda(cudaStreamSynchronize(stream), "stream synchronize");
  // The host indexes with these, so they are checked (cheaply: Q entries) even though kernels trust the layout.
  const auto bad = [&](const std::string& what) {
    Fail(TESSEL_STATUS_BAD_DATA, std::string("segment layout (") + name + " runs): " + what);
  };
  if (run_item[0] != 0 || run_item[static_cast<size_t>(num_runs)] != side.num_items) {
    bad("run offsets must start at 0 and end at " + std::to_string(side.num_items));
  }
  RelationOrder order;
  std::vector<int64_t> rel_runs(static_cast<size_t>(r) + 1, 0);  // counts, then the first index in runs[]
  order.rel_start.assign(static_cast<size_t>(r) + 1, 0);
  for (int64_t q = 0; q < num_runs; ++q) {
    const int64_t rel = run_rel[static_cast<size_t>(q)];
    const int64_t size = run_item[static_cast<size_t>(q + 1)] - run_item[static_cast<size_t>(q)];
    if (rel < 0 || rel >= r) bad("run " + std::to_string(q) + " has relation " + std::to_string(rel));
    if (size < 0) bad("run offsets decrease at " + std::to_string(q + 1));
    if (size == 0) continue;
    ++rel_runs[static_cast<size_t>(rel) + 1];
    order.rel_start[static_cast<size_t>(rel) + 1] += size;
  }
  for (size_t rel = 0; rel < static_cast<size_t>(r); ++rel) {
    rel_runs[rel + 1] += rel_runs[rel];
    order.rel_start[rel + 1] += order.rel_start[rel];
  }
  const int64_t j_count = rel_runs[static_cast<size_t>(r)];
  order.num_runs = j_count;
  order.plan.assign(static_cast<size_t>(2 * j_count + 1), 0);
  std::vector<int64_t> next_run(rel_runs.begin(), rel_runs.end() - 1);
  std::vector<int64_t> next_pos(order.rel_start.begin(), order.rel_start.end() - 1);
  for (int64_t q = 0; q < num_runs; ++q) {
    const size_t rel = static_cast<size_t>(run_rel[static_cast<size_t>(q)]);
    const int64_t size = run_item[static_cast<size_t>(q + 1)] - run_item[static_cast<size_t>(q)];
    if (size == 0) continue;
    const int64_t j = next_run[rel]++;
    order.plan[static_cast<size_t>(j)] = q;
    order.plan[static_cast<size_t>(j_count + j)] = next_pos[rel];
    next_pos[rel] += size;
  }
  order.plan[static_cast<size_t>(2 * j_count)] = side.num_items;
  return order;
}

// item_of[i], rel_of[i] = the item at position p0 + i of the relation order and its relation: runs[j] is the
// j-th run of that order and pos[j] its first position, pos[num_runs] the number of items. Static: a
// non-template kernel defined in a header would otherwise be defined once per including .cu file.
static __global__ void MapRowsKernel(const int64_t* runs, const int64_t* pos, int64_t num_runs, const int64_t* run_item,
                                     const int32_t* run_rel, int64_t p0, int64_t rows, int64_t* item_of,
                                     int32_t* rel_of) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = p0 + i;
    const int64_t j = RunOf(pos, num_runs, p);
    const int64_t q = runs[j];
    item_of[i] = run_item[q] + (p - pos[j]);
    rel_of[i] = run_rel[q];
  }
}

// A walk over one side's items in relation order, chunk by chunk: for each chunk the device arrays item_of
// and rel_of hold its rows' items and relations, and the host knows its relation slices.
class Sweep {
 public:
  Sweep(const KernelArgs& args, const Side& side, int64_t r, int64_t chunk, const char* name, cudaStream_t stream)
      : side_(side),
        stream_(stream),
        chunk_(chunk),
        order_(OrderByRelation(side, r, name, stream)),
        plan_(args, static_cast<int64_t>(order_.plan.size())),
        item_of_(args, chunk),
        rel_of_(args, chunk) {
    // Copies the plan and waits (a second sync), so that the host buffer may go while kernels still run.
    CheckCuda(cudaMemcpyAsync(plan_.get(), order_.plan.data(), order_.plan.size() * sizeof(int64_t),
                              cudaMemcpyHostToDevice, stream),
              "copy the relation order to the device");
    CheckCuda(cudaStreamSynchronize(stream), "stream synchronize");
  }
  Sweep(const Sweep&) = delete;
  Sweep& operator=(const Sweep&) = delete;

  int64_t chunk() const { return chunk_; }
  const int64_t* item_of() const { return item_of_.get(); }
  const int32_t* rel_of() const { return rel_of_.get(); }

  // fn(rows) for each chunk, after item_of and rel_of are mapped (rows <= chunk).
  template <typename F>
  void ForEachChunk(F&& fn) {
    for (p0_ = 0; p0_ < side_.num_items; p0_ += chunk_) {
      const int64_t rows = std::min(chunk_, side_.num_items - p0_);
      MapRowsKernel<<<Blocks(rows), kThreads, 0, stream_>>>(plan_.get(), plan_.get() + order_.num_runs, order_.num_runs,
                                                            side_.run_item, side_.run_rel, p0_, rows, item_of_.get(),
                                                            rel_of_.get());
      CheckLaunch("MapRowsKernel");
      fn(rows);
    }
  }

  // fn(rel, lo, len) for each relation with rows [lo, lo + len) in the current chunk of `rows` rows.
  template <typename F>
  void ForEachSlice(int64_t rows, F&& fn) const {
    const int64_t r = static_cast<int64_t>(order_.rel_start.size()) - 1;
    for (int64_t rel = 0; rel < r; ++rel) {
      const int64_t lo = std::max(p0_, order_.rel_start[static_cast<size_t>(rel)]);
      const int64_t hi = std::min(p0_ + rows, order_.rel_start[static_cast<size_t>(rel) + 1]);
      if (lo < hi) fn(rel, lo - p0_, hi - lo);
    }
  }

 private:
  Side side_;
  cudaStream_t stream_;
  int64_t chunk_;
  RelationOrder order_;
  Workspace<int64_t> plan_;
  Workspace<int64_t> item_of_;
  Workspace<int32_t> rel_of_;
  int64_t p0_ = 0;  // the current chunk's first position
};

// ---------------------------------------------------------------------------------------------------
// Heavy items. The warp-per-item kernels walk an item's edges serially, so one hub (an entity with
// thousands of edges of one relation: FB15k-237 has them) held its whole launch: the kernel took as long
// as that warp. An item with more than kHeavyEdges edges is instead deferred by the warp-per-item kernel,
// which zeroes its outputs and lists it as units of at most kHeavyEdges edges; a second launch
// (grid-striding over the listed units, whose count it reads on the device) adds each unit's share
// atomically.

inline constexpr int64_t kHeavyEdges = 256;

struct HeavyUnits {
  unsigned long long* count = nullptr;  // units listed
  int64_t* unit = nullptr;              // [2 * capacity]: chunk row, first edge
};

// The list for one sweep: capacity for `edges` edges in items of a chunk of `chunk` rows.
class HeavyList {
 public:
  HeavyList(const KernelArgs& args, int64_t edges, int64_t chunk)
      : count_(args, 1), unit_(args, 2 * ((edges + kHeavyEdges - 1) / kHeavyEdges + chunk)) {}
  // Empties the list (before each chunk's first launch).
  void Reset(cudaStream_t stream) const {
    CheckCuda(cudaMemsetAsync(count_.get(), 0, sizeof(unsigned long long), stream), "zero the heavy-item count");
  }
  HeavyUnits units() const { return HeavyUnits{count_.get(), unit_.get()}; }

 private:
  Workspace<unsigned long long> count_;
  Workspace<int64_t> unit_;
};

// Lists chunk row i, whose edges are [e0, e1), as units of kHeavyEdges edges (one lane of one warp per
// item calls it).
__device__ inline void ListHeavy(HeavyUnits hu, int64_t i, int64_t e0, int64_t e1) {
  const int64_t n = (e1 - e0 + kHeavyEdges - 1) / kHeavyEdges;
  const int64_t base = static_cast<int64_t>(atomicAdd(hu.count, static_cast<unsigned long long>(n)));
  for (int64_t j = 0; j < n; ++j) {
    hu.unit[2 * (base + j)] = i;
    hu.unit[2 * (base + j) + 1] = e0 + j * kHeavyEdges;
  }
}

// Blocks for the second launch: enough warps to fill the device, grid-striding over however many units.
inline unsigned HeavyBlocks() { return 1024; }

// ---------------------------------------------------------------------------------------------------
// Products per relation over a chunk's rows, one launch for all its relations (a cuBLAS call per relation
// slice costs a launch each: on FB15k-237, 475 relations, that launch time was most of the epoch). Rows
// come in relation order, so a tile of rows holds one relation or a few runs of them.

inline constexpr int kRelTileRows = 32;    // RowRelGemm: rows per tile
inline constexpr int kRelTileCols = 64;    // both: output columns per tile (one per thread of a row group)
inline constexpr int kRelTileK = 32;       // RowRelGemm: reduction depth per shared-memory step
inline constexpr int kRelOuterRows = 256;  // RelOuterAdd: rows per block, in steps of 32

// C[i] = alpha * A[i] M_{rel_of[i]} (+ beta * C[i]) for a tile of 32 rows and 64 columns per block.
template <typename T>
__global__ void __launch_bounds__(256)
    RowRelGemmKernel(int64_t rows, int64_t n, int64_t kd, T alpha, const T* a, int64_t lda, const T* m,
                     int64_t m_stride, int64_t ldm, bool trans, T beta, T* c, int64_t ldc, const int32_t* rel_of) {
  __shared__ T as[kRelTileRows][kRelTileK];
  __shared__ T ms[kRelTileK][kRelTileCols];
  __shared__ int32_t rel_s[kRelTileRows];
  const int64_t r0 = blockIdx.x * int64_t(kRelTileRows), c0 = blockIdx.y * int64_t(kRelTileCols);
  const int tid = static_cast<int>(threadIdx.x), tr = tid / kRelTileCols, tc = tid % kRelTileCols;
  const int tile_rows = static_cast<int>(rows - r0 < kRelTileRows ? rows - r0 : kRelTileRows);
  if (tid < kRelTileRows) rel_s[tid] = tid < tile_rows ? rel_of[r0 + tid] : -1;
  __syncthreads();
  T acc[8] = {};
  for (int start = 0; start < tile_rows;) {  // the same runs on every thread
    const int32_t rel = rel_s[start];
    int end = start + 1;
    while (end < tile_rows && rel_s[end] == rel) ++end;
    const T* mr = m + rel * m_stride;
    for (int64_t k0 = 0; k0 < kd; k0 += kRelTileK) {
      for (int idx = tid; idx < kRelTileRows * kRelTileK; idx += blockDim.x) {
        const int row = idx / kRelTileK, kk = idx % kRelTileK;
        as[row][kk] = row >= start && row < end && k0 + kk < kd ? a[(r0 + row) * lda + k0 + kk] : T(0);
      }
      for (int idx = tid; idx < kRelTileK * kRelTileCols; idx += blockDim.x) {
        const int kk = idx / kRelTileCols, cc = idx % kRelTileCols;
        T v = T(0);
        if (k0 + kk < kd && c0 + cc < n) v = trans ? mr[(c0 + cc) * ldm + k0 + kk] : mr[(k0 + kk) * ldm + c0 + cc];
        ms[kk][cc] = v;
      }
      __syncthreads();
#pragma unroll 8
      for (int kk = 0; kk < kRelTileK; ++kk) {
        const T mv = ms[kk][tc];
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] += as[tr * 8 + i][kk] * mv;
      }
      __syncthreads();
    }
    start = end;
  }
  if (c0 + tc >= n) return;
  for (int i = 0; i < 8; ++i) {
    const int row = tr * 8 + i;
    if (row >= tile_rows) break;
    T* out = c + (r0 + row) * ldc + c0 + tc;
    *out = beta == T(0) ? alpha * acc[i] : alpha * acc[i] + beta * *out;
  }
}

// Slices of at least this many rows go to cuBLAS (one call each, at its full rate); runs of shorter ones
// to the kernels above (one launch per run).
inline constexpr int64_t kBigSlice = 8192;

// fn_small(lo, len) for each maximal run of consecutive slices shorter than kBigSlice, fn_big(rel, lo, len)
// for each longer slice, over the current chunk of `rows` rows of `sw`, in row order.
template <typename Small, typename Big>
void ForEachSliceGroup(const Sweep& sw, int64_t rows, Small&& fn_small, Big&& fn_big) {
  int64_t run_lo = 0, run_len = 0;
  sw.ForEachSlice(rows, [&](int64_t rel, int64_t lo, int64_t len) {
    if (len < kBigSlice) {
      if (run_len == 0) run_lo = lo;
      run_len += len;
      return;
    }
    if (run_len > 0) fn_small(run_lo, run_len);
    run_len = 0;
    fn_big(rel, lo, len);
  });
  if (run_len > 0) fn_small(run_lo, run_len);
}

// C[i] = alpha * A[i] M_{rel_of[i]} + beta * C[i] for the rows i < rows of the current chunk of `sw`: A is
// [rows, kd] (row stride lda); M_rel = m + rel * m_stride is [kd, n] (row stride ldm) or, with trans, the
// transpose of the [n, kd] matrix stored there; C is [rows, n] (ldc), not read when beta = 0.
template <typename T>
void RowRelGemm(const Sweep& sw, int64_t rows, cublasHandle_t blas, int64_t n, int64_t kd, T alpha, const T* a,
                int64_t lda, const T* m, int64_t m_stride, int64_t ldm, bool trans, T beta, T* c, int64_t ldc,
                cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return;
  ForEachSliceGroup(
      sw, rows,
      [&](int64_t lo, int64_t len) {
        const dim3 grid(static_cast<unsigned>((len + kRelTileRows - 1) / kRelTileRows),
                        static_cast<unsigned>((n + kRelTileCols - 1) / kRelTileCols));
        RowRelGemmKernel<T><<<grid, 256, 0, stream>>>(len, n, kd, alpha, a + lo * lda, lda, m, m_stride, ldm, trans,
                                                      beta, c + lo * ldc, ldc, sw.rel_of() + lo);
        CheckLaunch("RowRelGemmKernel");
      },
      [&](int64_t rel, int64_t lo, int64_t len) {
        GemmRowMajor(blas, Trans::kNo, trans ? Trans::kYes : Trans::kNo, len, n, kd, alpha, a + lo * lda, lda,
                     m + rel * m_stride, ldm, beta, c + lo * ldc, ldc);
      });
}

// D_rel += alpha * sum over the block's rows i with rel_of[i] = rel of A[i]^T B[i], for a 32 x 64 tile of D.
template <typename T>
__global__ void __launch_bounds__(256)
    RelOuterAddKernel(int64_t rows, int64_t p, int64_t n, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
                      T* d, int64_t d_stride, int64_t ldd, const int32_t* rel_of) {
  constexpr int kStep = 32, kTileP = 32;
  __shared__ T as[kStep][kTileP];
  __shared__ T bs[kStep][kRelTileCols];
  __shared__ int32_t rel_s[kStep];
  const int64_t tiles_n = (n + kRelTileCols - 1) / kRelTileCols;
  const int64_t p0 = (blockIdx.y / tiles_n) * kTileP, c0 = (blockIdx.y % tiles_n) * int64_t(kRelTileCols);
  const int tid = static_cast<int>(threadIdx.x), tp = tid / kRelTileCols, tc = tid % kRelTileCols;
  const int64_t first = blockIdx.x * int64_t(kRelOuterRows);
  const int64_t last = rows < first + kRelOuterRows ? rows : first + kRelOuterRows;
  T acc[8] = {};
  int32_t cur = -1;
  const auto flush = [&]() {
    if (cur < 0 || c0 + tc >= n) return;
    for (int i = 0; i < 8; ++i) {
      const int64_t row = p0 + tp * 8 + i;
      if (row < p) atomicAdd(d + cur * d_stride + row * ldd + c0 + tc, alpha * acc[i]);
      acc[i] = T(0);
    }
  };
  for (int64_t s0 = first; s0 < last; s0 += kStep) {
    const int step = static_cast<int>(last - s0 < kStep ? last - s0 : kStep);
    for (int idx = tid; idx < kStep * kTileP; idx += blockDim.x) {
      const int j = idx / kTileP, i = idx % kTileP;
      as[j][i] = j < step && p0 + i < p ? a[(s0 + j) * lda + p0 + i] : T(0);
    }
    for (int idx = tid; idx < kStep * kRelTileCols; idx += blockDim.x) {
      const int j = idx / kRelTileCols, cc = idx % kRelTileCols;
      bs[j][cc] = j < step && c0 + cc < n ? b[(s0 + j) * ldb + c0 + cc] : T(0);
    }
    if (tid < kStep) rel_s[tid] = tid < step ? rel_of[s0 + tid] : -1;
    __syncthreads();
    for (int j = 0; j < step; ++j) {
      if (rel_s[j] != cur) {  // the same on every thread
        flush();
        cur = rel_s[j];
      }
      const T bv = bs[j][tc];
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += as[j][tp * 8 + i] * bv;
    }
    __syncthreads();
  }
  flush();
}

// D_rel += alpha * sum over the rows i < rows of the current chunk of `sw` with rel_of[i] = rel of A[i]^T B[i]:
// A is [rows, p] (lda), B is [rows, n] (ldb), D_rel = d + rel * d_stride is [p, n] (ldd). Atomic in the
// kernel: its blocks of one relation add up.
template <typename T>
void RelOuterAdd(const Sweep& sw, int64_t rows, cublasHandle_t blas, int64_t p, int64_t n, T alpha, const T* a,
                 int64_t lda, const T* b, int64_t ldb, T* d, int64_t d_stride, int64_t ldd, cudaStream_t stream) {
  if (rows <= 0 || p <= 0 || n <= 0) return;
  ForEachSliceGroup(
      sw, rows,
      [&](int64_t lo, int64_t len) {
        const int64_t tiles = ((p + 31) / 32) * ((n + kRelTileCols - 1) / kRelTileCols);
        const dim3 grid(static_cast<unsigned>((len + kRelOuterRows - 1) / kRelOuterRows), static_cast<unsigned>(tiles));
        RelOuterAddKernel<T><<<grid, 256, 0, stream>>>(len, p, n, alpha, a + lo * lda, lda, b + lo * ldb, ldb, d,
                                                       d_stride, ldd, sw.rel_of() + lo);
        CheckLaunch("RelOuterAddKernel");
      },
      [&](int64_t rel, int64_t lo, int64_t len) {
        GemmRowMajor(blas, Trans::kYes, Trans::kNo, p, n, len, alpha, a + lo * lda, lda, b + lo * ldb, ldb, T(1),
                     d + rel * d_stride, ldd);
      });
}

// ---------------------------------------------------------------------------------------------------
// Rows by item, and plain fills.

// out[i] = src[item_row[item_of[i]]], rows of `width` values.
template <typename T>
__global__ void GatherRowsKernel(const T* src, int64_t width, const int32_t* item_row, const int64_t* item_of,
                                 int64_t rows, T* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * width;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = src[static_cast<int64_t>(item_row[item_of[i / width]]) * width + i % width];
  }
}

// out[item_row[item_of[i]]] += c[i], rows of `width` values. Atomic: rows of one chunk may share an output row.
template <typename T>
__global__ void ScatterAddKernel(const T* c, const int32_t* item_row, const int64_t* item_of, int64_t rows,
                                 int64_t width, T* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * width;
       i += int64_t(gridDim.x) * blockDim.x) {
    atomicAdd(out + static_cast<int64_t>(item_row[item_of[i / width]]) * width + i % width, c[i]);
  }
}

template <typename T>
__global__ void FillKernel(T* p, int64_t n, T value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    p[i] = value;
  }
}

inline void ZeroAsync(void* p, int64_t count, size_t elem, cudaStream_t stream, const char* what) {
  if (count > 0) CheckCuda(cudaMemsetAsync(p, 0, static_cast<size_t>(count) * elem, stream), what);
}

// out[i] = src[item_row[item_of[i]]] for the current chunk's rows of `sw` (GatherRowsKernel).
template <typename T>
void Gather(const T* src, int64_t width, const int32_t* item_row, const Sweep& sw, int64_t rows, T* out,
            cudaStream_t stream) {
  if (rows * width == 0) return;
  GatherRowsKernel<T><<<Blocks(rows * width), kThreads, 0, stream>>>(src, width, item_row, sw.item_of(), rows, out);
  CheckLaunch("GatherRowsKernel");
}

// out[item_row[item_of[i]]] += c[i] for the current chunk's rows of `sw` (ScatterAddKernel).
template <typename T>
void ScatterAdd(const T* c, int64_t width, const int32_t* item_row, const Sweep& sw, int64_t rows, T* out,
                cudaStream_t stream) {
  if (rows * width == 0) return;
  ScatterAddKernel<T><<<Blocks(rows * width), kThreads, 0, stream>>>(c, item_row, sw.item_of(), rows, width, out);
  CheckLaunch("ScatterAddKernel");
}

}  // namespace tessel::kernels::rgnn::fused_cuda

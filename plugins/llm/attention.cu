// llm.attention.fwd/.bwd on CUDA, written for correctness first: one block per (b, h, row), scores in
// dynamic shared memory, every sum in a fixed order (so the results are deterministic).
//  - forward, per query row i: s_j = scale q_i . k_j (j <= i), softmax, y_i = sum_j p_j v_j, lse_i.
//  - backward, per query row i: D_i = dY_i . Y_i, ds_j = p_j (dY_i . v_j - D_i), dq_i = scale sum_j ds_j k_j;
//    then per key row j: dk_j = scale sum_{i >= j} ds_ij q_i, dv_j = sum_{i >= j} p_ij dY_i (recomputing
//    p_ij from lse and ds_ij from D). Every element of dqkv is written.
// Arguments: attention_args.h.
#include "attention_args.h"
#include "cuda_rows.cuh"

namespace tessel::kernels::llm {
namespace {

constexpr int kAttentionThreads = 128;

// The sizes every kernel needs, and the addresses of one (b, h) slice.
struct Dims {
  int64_t b, s, c, h, hs, q;
  __device__ int64_t QkvRow(int64_t bi, int64_t t) const { return (bi * s + t) * q; }
  __device__ int64_t YRow(int64_t bi, int64_t t) const { return (bi * s + t) * c; }
};

template <typename T>
__device__ T Dot(const T* x, const T* y, int64_t n) {
  T sum = T(0);
  for (int64_t d = 0; d < n; ++d) sum += x[d] * y[d];
  return sum;
}

// Block u = (b, h, i). Shared: q_i [hs], then p [s].
template <typename T>
__global__ void AttentionFwdKernel(const T* qkv, Dims dm, T scale, T* y, T* lse) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* sq = reinterpret_cast<T*>(shared_bytes);
  T* p = sq + dm.hs;
  __shared__ T scratch[32];
  const int64_t u = blockIdx.x, i = u % dm.s, hi = (u / dm.s) % dm.h, bi = u / (dm.s * dm.h);
  const T* qi = qkv + dm.QkvRow(bi, i) + hi * dm.hs;
  for (int64_t d = threadIdx.x; d < dm.hs; d += blockDim.x) sq[d] = qi[d];
  __syncthreads();
  T max = -INFINITY;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    p[j] = scale * Dot(sq, qkv + dm.QkvRow(bi, j) + dm.c + hi * dm.hs, dm.hs);
    max = p[j] > max ? p[j] : max;
  }
  max = BlockReduce(max, MaxOp(), scratch);
  T sum = T(0);
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    p[j] = exp(p[j] - max);
    sum += p[j];
  }
  sum = BlockReduce(sum, SumOp(), scratch);  // synchronises: every p[j] is written
  for (int64_t d = threadIdx.x; d < dm.hs; d += blockDim.x) {
    const T* v = qkv + 2 * dm.c + hi * dm.hs + d;
    T acc = T(0);
    for (int64_t j = 0; j <= i; ++j) acc += p[j] * v[dm.QkvRow(bi, j)];
    y[dm.YRow(bi, i) + hi * dm.hs + d] = acc / sum;
  }
  if (threadIdx.x == 0) lse[(bi * dm.h + hi) * dm.s + i] = max + log(sum);
}

// Block u = (b, h, i): D_i (kept for the key pass) and dq_i. Shared: q_i, dY_i [hs each], then ds [s].
template <typename T>
__global__ void AttentionBwdQueryKernel(const T* dy, const T* qkv, const T* y, const T* lse, Dims dm, T scale, T* dqkv,
                                        T* dvec) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* sq = reinterpret_cast<T*>(shared_bytes);
  T* sdy = sq + dm.hs;
  T* ds = sdy + dm.hs;
  __shared__ T scratch[32];
  const int64_t u = blockIdx.x, i = u % dm.s, hi = (u / dm.s) % dm.h, bi = u / (dm.s * dm.h);
  T dot = T(0);
  for (int64_t d = threadIdx.x; d < dm.hs; d += blockDim.x) {
    sq[d] = qkv[dm.QkvRow(bi, i) + hi * dm.hs + d];
    sdy[d] = dy[dm.YRow(bi, i) + hi * dm.hs + d];
    dot += sdy[d] * y[dm.YRow(bi, i) + hi * dm.hs + d];
  }
  const T big_d = BlockReduce(dot, SumOp(), scratch);  // synchronises: sq and sdy are loaded
  const T l = lse[(bi * dm.h + hi) * dm.s + i];
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    const T* kj = qkv + dm.QkvRow(bi, j) + dm.c + hi * dm.hs;
    const T p = exp(scale * Dot(sq, kj, dm.hs) - l);
    ds[j] = p * (Dot(sdy, kj + dm.c, dm.hs) - big_d);
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < dm.hs; d += blockDim.x) {
    const T* k = qkv + dm.c + hi * dm.hs + d;
    T acc = T(0);
    for (int64_t j = 0; j <= i; ++j) acc += ds[j] * k[dm.QkvRow(bi, j)];
    dqkv[dm.QkvRow(bi, i) + hi * dm.hs + d] = scale * acc;
  }
  if (threadIdx.x == 0) dvec[(bi * dm.h + hi) * dm.s + i] = big_d;
}

// Block u = (b, h, j): dk_j and dv_j. Shared: k_j, v_j [hs each], then p and ds [s each].
template <typename T>
__global__ void AttentionBwdKeyKernel(const T* dy, const T* qkv, const T* lse, const T* dvec, Dims dm, T scale,
                                      T* dqkv) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* sk = reinterpret_cast<T*>(shared_bytes);
  T* sv = sk + dm.hs;
  T* p = sv + dm.hs;
  T* ds = p + dm.s;
  const int64_t u = blockIdx.x, j = u % dm.s, hi = (u / dm.s) % dm.h, bi = u / (dm.s * dm.h);
  for (int64_t d = threadIdx.x; d < dm.hs; d += blockDim.x) {
    sk[d] = qkv[dm.QkvRow(bi, j) + dm.c + hi * dm.hs + d];
    sv[d] = qkv[dm.QkvRow(bi, j) + 2 * dm.c + hi * dm.hs + d];
  }
  __syncthreads();
  const T* lse_seq = lse + (bi * dm.h + hi) * dm.s;
  const T* d_seq = dvec + (bi * dm.h + hi) * dm.s;
  for (int64_t i = j + threadIdx.x; i < dm.s; i += blockDim.x) {
    const T pij = exp(scale * Dot(qkv + dm.QkvRow(bi, i) + hi * dm.hs, sk, dm.hs) - lse_seq[i]);
    p[i] = pij;
    ds[i] = pij * (Dot(dy + dm.YRow(bi, i) + hi * dm.hs, sv, dm.hs) - d_seq[i]);
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < dm.hs; d += blockDim.x) {
    T dk = T(0), dv = T(0);
    for (int64_t i = j; i < dm.s; ++i) {
      dk += ds[i] * qkv[dm.QkvRow(bi, i) + hi * dm.hs + d];
      dv += p[i] * dy[dm.YRow(bi, i) + hi * dm.hs + d];
    }
    dqkv[dm.QkvRow(bi, j) + dm.c + hi * dm.hs + d] = scale * dk;
    dqkv[dm.QkvRow(bi, j) + 2 * dm.c + hi * dm.hs + d] = dv;
  }
}

Dims DimsOf(const AttentionShape& a) { return Dims{a.b, a.s, a.c, a.h, a.hs, a.q}; }

struct AttentionFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const AttentionFwdArgs<T>& a) {
    const int64_t b = a.shape.b, s = a.shape.s, h = a.shape.h;
    if (b * s == 0) return;
    const size_t shared = sizeof(T) * static_cast<size_t>(a.shape.hs + s);
    AllowSharedMemory(AttentionFwdKernel<T>, shared);
    const T scale = T(1) / std::sqrt(static_cast<T>(a.shape.hs));
    AttentionFwdKernel<T><<<static_cast<unsigned>(b * h * s), kAttentionThreads, shared, StreamOf(args)>>>(
        a.qkv, DimsOf(a.shape), scale, a.y, a.lse);
    CheckLaunch("AttentionFwdKernel");
  }
};

struct AttentionBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const AttentionBwdArgs<T>& a) {
    const int64_t b = a.shape.b, s = a.shape.s, h = a.shape.h;
    if (b * s == 0) return;
    cudaStream_t stream = StreamOf(args);
    const T scale = T(1) / std::sqrt(static_cast<T>(a.shape.hs));
    const unsigned rows = static_cast<unsigned>(b * h * s);
    Workspace<T> dvec(args, b * h * s);
    const size_t query_shared = sizeof(T) * static_cast<size_t>(2 * a.shape.hs + s);
    AllowSharedMemory(AttentionBwdQueryKernel<T>, query_shared);
    AttentionBwdQueryKernel<T><<<rows, kAttentionThreads, query_shared, stream>>>(
        a.dy, a.qkv, a.y, a.lse, DimsOf(a.shape), scale, a.dqkv, dvec.get());
    CheckLaunch("AttentionBwdQueryKernel");
    const size_t key_shared = sizeof(T) * static_cast<size_t>(2 * a.shape.hs + 2 * s);
    AllowSharedMemory(AttentionBwdKeyKernel<T>, key_shared);
    AttentionBwdKeyKernel<T><<<rows, kAttentionThreads, key_shared, stream>>>(a.dy, a.qkv, a.lse, dvec.get(),
                                                                              DimsOf(a.shape), scale, a.dqkv);
    CheckLaunch("AttentionBwdKeyKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(AttentionFwdCuda, AttentionFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(AttentionBwdCuda, AttentionBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::llm

// rgnn.aggregate.fwd/.bwd on CUDA: gathers, one thread per (output row, column), so neighbouring
// threads read neighbouring columns of the same source row (coalesced) and no atomics are needed.
// Arguments: aggregate_args.h.
#include "aggregate_args.h"
#include "cuda_support.h"

namespace tessel::kernels::rgnn {
namespace {

template <typename T>
__global__ void AggregateFwdKernel(const T* y, const int64_t* edge_uniq, const T* norm, const int64_t* dst_ptr,
                                   const int64_t* dst_edges, int64_t n, int64_t d, T* h) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * d; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / d, col = i % d;
    T acc = 0;
    for (int64_t j = dst_ptr[row]; j < dst_ptr[row + 1]; ++j) {
      const int64_t e = dst_edges[j];
      acc += norm[e] * y[edge_uniq[e] * d + col];
    }
    h[i] = acc;
  }
}

template <typename T>
__global__ void AggregateBwdKernel(const T* dh, const int64_t* dst, const T* norm, const int64_t* uniq_edge_ptr,
                                   int64_t u, int64_t d, T* dy) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < u * d; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / d, col = i % d;
    T acc = 0;
    for (int64_t e = uniq_edge_ptr[row]; e < uniq_edge_ptr[row + 1]; ++e) acc += norm[e] * dh[dst[e] * d + col];
    dy[i] = acc;
  }
}

struct AggregateFwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const AggregateFwdArgs<T>& a) {
    const int64_t n = a.n, d = a.d;
    if (n * d == 0) return;
    AggregateFwdKernel<T>
        <<<Blocks(n * d), kThreads, 0, StreamOf(args)>>>(a.y, a.edge_uniq, a.norm, a.dst_ptr, a.dst_edges, n, d, a.h);
    CheckLaunch("AggregateFwdKernel");
  }
};

struct AggregateBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const AggregateBwdArgs<T>& a) {
    const int64_t u = a.u, d = a.d;
    if (u * d == 0) return;
    AggregateBwdKernel<T>
        <<<Blocks(u * d), kThreads, 0, StreamOf(args)>>>(a.dh, a.dst, a.norm, a.uniq_edge_ptr, u, d, a.dy);
    CheckLaunch("AggregateBwdKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(AggregateFwdCuda, AggregateFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(AggregateBwdCuda, AggregateBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn

// rgnn.aggregate.fwd/.bwd on CUDA: gathers, one thread per (output row, column), so neighbouring
// threads read neighbouring columns of the same source row (coalesced) and no atomics are needed.
#include "cuda_support.h"
#include "kernels.h"

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

template <typename T>
void AggregateFwd(const KernelArgs& args) {
  int64_t u = kUnbound, d = kUnbound, e = kUnbound, n1 = kUnbound;
  const T* y = args.In<T>(0, "Y", {&u, &d});
  const int64_t* edge_uniq = args.In<int64_t>(1, "edge_uniq", {&e});
  const T* norm = args.In<T>(2, "norm", {&e});
  const int64_t* dst_ptr = args.In<int64_t>(3, "dst_ptr", {&n1});
  const int64_t* dst_edges = args.In<int64_t>(4, "dst_edges", {&e});
  int64_t n = n1 - 1;
  if (n < 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "input 'dst_ptr' must have at least one element");
  T* h = args.Out<T>(0, "H", {&n, &d});
  if (n * d == 0) return;
  AggregateFwdKernel<T>
      <<<Blocks(n * d), kThreads, 0, StreamOf(args)>>>(y, edge_uniq, norm, dst_ptr, dst_edges, n, d, h);
  CheckLaunch("AggregateFwdKernel");
}

template <typename T>
void AggregateBwd(const KernelArgs& args) {
  int64_t n = kUnbound, d = kUnbound, e = kUnbound, u1 = kUnbound;
  const T* dh = args.In<T>(0, "dH", {&n, &d});
  const int64_t* dst = args.In<int64_t>(1, "dst", {&e});
  const T* norm = args.In<T>(2, "norm", {&e});
  const int64_t* uniq_edge_ptr = args.In<int64_t>(3, "uniq_edge_ptr", {&u1});
  int64_t u = u1 - 1;
  if (u < 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "input 'uniq_edge_ptr' must have at least one element");
  T* dy = args.Out<T>(0, "dY", {&u, &d});
  if (u * d == 0) return;
  AggregateBwdKernel<T><<<Blocks(u * d), kThreads, 0, StreamOf(args)>>>(dh, dst, norm, uniq_edge_ptr, u, d, dy);
  CheckLaunch("AggregateBwdKernel");
}

struct AggregateFwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_aggregate_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    AggregateFwd<T>(args);
  }
};

struct AggregateBwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_aggregate_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    AggregateBwd<T>(args);
  }
};

}  // namespace

TESSEL_DEFINE_UNBOUND_KERNEL(AggregateFwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_UNBOUND_KERNEL(AggregateBwdCuda, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::rgnn

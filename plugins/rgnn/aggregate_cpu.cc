// rgnn.aggregate.fwd/.bwd on CPU. Both are gathers (one writer per output row), so they parallelise
// without atomics: forward walks the destination CSR, backward the edge range of each compact row.
#include <algorithm>

#include "index_checks.h"
#include "kernels.h"

namespace tessel::kernels::rgnn {
namespace {

int64_t RowGrain(int64_t d) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, d)); }

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
  CheckIndices(edge_uniq, e, u, "edge_uniq");
  CheckOffsets(dst_ptr, n, e, "dst_ptr");
  CheckIndices(dst_edges, e, e, "dst_edges");

  args.ParallelFor(n, RowGrain(d), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      T* out = h + i * d;
      std::fill_n(out, d, T(0));
      for (int64_t j = dst_ptr[i]; j < dst_ptr[i + 1]; ++j) {
        const int64_t edge = dst_edges[j];
        const T scale = norm[edge];
        const T* in = y + edge_uniq[edge] * d;
        for (int64_t c = 0; c < d; ++c) out[c] += scale * in[c];
      }
    }
  });
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
  CheckIndices(dst, e, n, "dst");
  CheckOffsets(uniq_edge_ptr, u, e, "uniq_edge_ptr");

  args.ParallelFor(u, RowGrain(d), [&](int64_t u0, int64_t u_end) {
    for (int64_t row = u0; row < u_end; ++row) {
      T* out = dy + row * d;
      std::fill_n(out, d, T(0));
      for (int64_t edge = uniq_edge_ptr[row]; edge < uniq_edge_ptr[row + 1]; ++edge) {
        const T scale = norm[edge];
        const T* in = dh + dst[edge] * d;
        for (int64_t c = 0; c < d; ++c) out[c] += scale * in[c];
      }
    }
  });
}

struct AggregateFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_aggregate_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    AggregateFwd<T>(args);
  }
};

struct AggregateBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_aggregate_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    AggregateBwd<T>(args);
  }
};

}  // namespace

TESSEL_DEFINE_UNBOUND_KERNEL(AggregateFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(AggregateBwdCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn

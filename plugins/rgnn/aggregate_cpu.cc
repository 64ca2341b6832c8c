// rgnn.aggregate.fwd/.bwd on CPU. Both are gathers (one writer per output row), so they parallelise
// without atomics: forward walks the destination CSR, backward the edge range of each compact row.
// Arguments and the index checks: aggregate_args.h.
#include <algorithm>

#include "aggregate_args.h"

namespace tessel::kernels::rgnn {
namespace {

int64_t RowGrain(int64_t d) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, d)); }

struct AggregateFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const AggregateFwdArgs<T>& a) {
    const int64_t d = a.d, n = a.n;
    const T* y = a.y;
    const int64_t* edge_uniq = a.edge_uniq;
    const T* norm = a.norm;
    const int64_t* dst_ptr = a.dst_ptr;
    const int64_t* dst_edges = a.dst_edges;
    T* h = a.h;
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
};

struct AggregateBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const AggregateBwdArgs<T>& a) {
    const int64_t d = a.d, u = a.u;
    const T* dh = a.dh;
    const int64_t* dst = a.dst;
    const T* norm = a.norm;
    const int64_t* uniq_edge_ptr = a.uniq_edge_ptr;
    T* dy = a.dy;
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
};

}  // namespace

TESSEL_DEFINE_KERNEL(AggregateFwdCpu, AggregateFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(AggregateBwdCpu, AggregateBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn

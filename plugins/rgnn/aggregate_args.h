// The arguments of rgnn.aggregate.fwd/.bwd (<tessel/ops/rgnn.h>), bound and checked here once for their
// CPU and CUDA kernels (aggregate*) and every dtype: forward Y [U, D], edge_uniq [E], norm [E],
// dst_ptr [N+1], dst_edges [E] -> H [N, D]; backward dH [N, D], dst [E], norm [E], uniq_edge_ptr [U+1]
// -> dY [U, D].
// Failure: Bind throws KernelError: invalid-argument for a shape or dtype that does not match; bad-data
// for an index or offset array out of range (checked where they are host memory: on the CPU; the CUDA
// kernels trust them).
#pragma once

#include <cstdint>

#include "index_checks.h"
#include "kernels.h"

namespace tessel::kernels::rgnn {

template <typename T>
struct AggregateFwdArgs {
  int64_t u = kUnbound, d = kUnbound, e = kUnbound, n = kUnbound;
  const T* y = nullptr;
  const int64_t* edge_uniq = nullptr;
  const T* norm = nullptr;
  const int64_t* dst_ptr = nullptr;
  const int64_t* dst_edges = nullptr;
  T* h = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_aggregate_fwd; }

  static AggregateFwdArgs Bind(const KernelArgs& args) {
    AggregateFwdArgs a;
    int64_t n1 = kUnbound;
    a.y = args.In<T>(0, "Y", {&a.u, &a.d});
    a.edge_uniq = args.In<int64_t>(1, "edge_uniq", {&a.e});
    a.norm = args.In<T>(2, "norm", {&a.e});
    a.dst_ptr = args.In<int64_t>(3, "dst_ptr", {&n1});
    a.dst_edges = args.In<int64_t>(4, "dst_edges", {&a.e});
    a.n = n1 - 1;
    if (a.n < 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "input 'dst_ptr' must have at least one element");
    a.h = args.Out<T>(0, "H", {&a.n, &a.d});
    if (args.data_check() == DataCheck::kFull) {
      CheckIndices(a.edge_uniq, a.e, a.u, "edge_uniq");
      CheckOffsets(a.dst_ptr, a.n, a.e, "dst_ptr");
      CheckIndices(a.dst_edges, a.e, a.e, "dst_edges");
    }
    return a;
  }
};

template <typename T>
struct AggregateBwdArgs {
  int64_t n = kUnbound, d = kUnbound, e = kUnbound, u = kUnbound;
  const T* dh = nullptr;
  const int64_t* dst = nullptr;
  const T* norm = nullptr;
  const int64_t* uniq_edge_ptr = nullptr;
  T* dy = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_aggregate_bwd; }

  static AggregateBwdArgs Bind(const KernelArgs& args) {
    AggregateBwdArgs a;
    int64_t u1 = kUnbound;
    a.dh = args.In<T>(0, "dH", {&a.n, &a.d});
    a.dst = args.In<int64_t>(1, "dst", {&a.e});
    a.norm = args.In<T>(2, "norm", {&a.e});
    a.uniq_edge_ptr = args.In<int64_t>(3, "uniq_edge_ptr", {&u1});
    a.u = u1 - 1;
    if (a.u < 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "input 'uniq_edge_ptr' must have at least one element");
    a.dy = args.Out<T>(0, "dY", {&a.u, &a.d});
    if (args.data_check() == DataCheck::kFull) {
      CheckIndices(a.dst, a.e, a.n, "dst");
      CheckOffsets(a.uniq_edge_ptr, a.u, a.e, "uniq_edge_ptr");
    }
    return a;
  }
};

}  // namespace tessel::kernels::rgnn

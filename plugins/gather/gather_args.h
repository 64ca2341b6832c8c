// The arguments of gather.rows (<tessel/ops/gather.h>), bound and checked here once for its CPU and CUDA
// kernels (gather*) and every dtype: table [N, D], ids [M] -> Y [M, D]. The ids are checked by the
// kernels themselves, while they copy: each CPU chunk checks its own before it copies a row, and the
// CUDA kernel skips a row with a bad id and records it; both then fail with CheckIndices' bad-data error
// (index_checks.h), naming the first bad position.
// Failure: Bind throws KernelError (invalid-argument) for a shape or dtype that does not match.
#pragma once

#include <cstdint>

#include "kernels.h"

namespace tessel::kernels::gather {

template <typename T>
struct GatherRowsArgs {
  int64_t n = kUnbound, d = kUnbound, m = kUnbound;
  const T* table = nullptr;
  const int64_t* ids = nullptr;
  T* y = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_gather_rows; }

  static GatherRowsArgs Bind(const KernelArgs& args) {
    GatherRowsArgs a;
    a.table = args.In<T>(0, "table", {&a.n, &a.d});
    a.ids = args.In<int64_t>(1, "ids", {&a.m});
    a.y = args.Out<T>(0, "Y", {&a.m, &a.d});
    return a;
  }

  int64_t RowBytes() const { return d * static_cast<int64_t>(sizeof(T)); }
};

}  // namespace tessel::kernels::gather

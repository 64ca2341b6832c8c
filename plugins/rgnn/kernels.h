// The kernels of libtessel_rgnn.so (<tessel/ops/rgnn.h>): one registration function per (op, device),
// collected by rgnn_plugin.cc, and the checks that several ops' binders share. Each op's arguments are
// bound and checked by its binder (the `*_args.h` headers of this folder), shared by its CPU and CUDA
// kernels: on the CPU it also validates every index array, and the CPU kernels run race-free on the
// host's pool without atomics (sums in a fixed order); the CUDA ones trust the indices and scatter with
// atomics. Every kernel is reentrant.
#pragma once

#include <tessel/ops/rgnn.h>

#include <cstdint>
#include <string>

#include "index_checks.h"
#include "kernel_support.h"

namespace tessel::kernels::rgnn {

KernelRegistration TypedLinearFwdCpuKernel();
KernelRegistration TypedLinearBwdCpuKernel();
KernelRegistration TypedEmbedFwdCpuKernel();
KernelRegistration TypedEmbedBwdCpuKernel();
KernelRegistration AggregateFwdCpuKernel();
KernelRegistration AggregateBwdCpuKernel();
KernelRegistration RgcnFwdCpuKernel();
KernelRegistration RgcnBwdCpuKernel();
KernelRegistration RgcnEmbedFwdCpuKernel();
KernelRegistration RgcnEmbedBwdCpuKernel();
KernelRegistration RgcnEmbedBwdRowsCpuKernel();
KernelRegistration RgatFwdCpuKernel();
KernelRegistration RgatBwdCpuKernel();
KernelRegistration RgatEmbedFwdCpuKernel();
KernelRegistration RgatEmbedBwdCpuKernel();
KernelRegistration HgtFwdCpuKernel();
KernelRegistration HgtBwdCpuKernel();
KernelRegistration TypedGateFwdCpuKernel();
KernelRegistration TypedGateBwdCpuKernel();
KernelRegistration BlockDiagFwdCpuKernel();
KernelRegistration BlockDiagBwdCpuKernel();

KernelRegistration TypedLinearFwdCudaKernel();
KernelRegistration TypedLinearBwdCudaKernel();
KernelRegistration TypedEmbedFwdCudaKernel();
KernelRegistration TypedEmbedBwdCudaKernel();
KernelRegistration AggregateFwdCudaKernel();
KernelRegistration AggregateBwdCudaKernel();
KernelRegistration RgcnFwdCudaKernel();
KernelRegistration RgcnBwdCudaKernel();
KernelRegistration RgcnEmbedFwdCudaKernel();
KernelRegistration RgcnEmbedBwdCudaKernel();
KernelRegistration RgcnEmbedBwdRowsCudaKernel();
KernelRegistration RgatFwdCudaKernel();
KernelRegistration RgatBwdCudaKernel();
KernelRegistration RgatEmbedFwdCudaKernel();
KernelRegistration RgatEmbedBwdCudaKernel();
KernelRegistration HgtFwdCudaKernel();
KernelRegistration HgtBwdCudaKernel();
KernelRegistration TypedGateFwdCudaKernel();
KernelRegistration TypedGateBwdCudaKernel();
KernelRegistration BlockDiagFwdCudaKernel();
KernelRegistration BlockDiagBwdCudaKernel();

// dX [dx_rows, K] of a backward: null when the caller skips it (0 rows), else it must have X's M rows.
template <typename T>
T* OptionalDx(T* dx, int64_t dx_rows, int64_t m) {
  if (dx_rows != 0 && dx_rows != m) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         "output 'dX' must have 0 rows (skip) or as many as X (" + std::to_string(m) + ")");
  }
  return dx_rows > 0 ? dx : nullptr;
}

// Index checks of host memory (DataCheck::kFull): bad-data errors naming the array; nothing on CUDA.
inline void CheckRowIds(const KernelArgs& args, const int64_t* row_id, int64_t m, int64_t v) {
  if (args.data_check() == DataCheck::kFull) CheckIndices(row_id, m, v, "row_id");
}
inline void CheckSegDst(const KernelArgs& args, const int32_t* seg_dst, int64_t s, int64_t n) {
  if (args.data_check() == DataCheck::kFull) CheckIndices(seg_dst, s, n, "seg_dst");
}

}  // namespace tessel::kernels::rgnn

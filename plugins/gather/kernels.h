// The kernels of libtessel_gather.so (<tessel/ops/gather.h>): one registration function per (op, device),
// collected by gather_plugin.cc.
// Thread safety: every kernel is reentrant; the CPU one runs race-free on the host's pool.
#pragma once

#include <tessel/ops/gather.h>

#include "kernel_support.h"

namespace tessel::kernels::gather {

KernelRegistration GatherRowsCpuKernel();
KernelRegistration GatherRowsCudaKernel();

}  // namespace tessel::kernels::gather

// The CPU kernels of libtessel_rgnn.so (semantics in rgnn_ops.h). Each is a tessel_kernel_fn: it never
// throws, and it runs its loops on the host's pool through call->parallel_for, race-free and without
// atomics. Reentrant: any number of calls may run at once.
#pragma once

#include <tessel/plugin.h>

namespace tessel::rgnn {

tessel_status* TypedLinearFwdCpu(void* state, const tessel_kernel_call* call);
tessel_status* TypedLinearBwdCpu(void* state, const tessel_kernel_call* call);
tessel_status* TypedEmbedFwdCpu(void* state, const tessel_kernel_call* call);
tessel_status* TypedEmbedBwdCpu(void* state, const tessel_kernel_call* call);
tessel_status* AggregateFwdCpu(void* state, const tessel_kernel_call* call);
tessel_status* AggregateBwdCpu(void* state, const tessel_kernel_call* call);
tessel_status* ReluFwdCpu(void* state, const tessel_kernel_call* call);
tessel_status* ReluBwdCpu(void* state, const tessel_kernel_call* call);
tessel_status* SoftmaxXentCpu(void* state, const tessel_kernel_call* call);
tessel_status* AdamStepCpu(void* state, const tessel_kernel_call* call);

}  // namespace tessel::rgnn

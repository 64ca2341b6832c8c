// The CUDA kernels of libtessel_rgnn.so (semantics in rgnn_ops.h), built only with TESSEL_HAVE_CUDA.
// Each is a tessel_kernel_fn that never throws. Work is queued on call->cuda_stream (the legacy default
// stream when null) and may still be running when the function returns, except where a kernel must
// read relation offsets on the host (typed_linear.*), which synchronises the stream once per call.
// Dense products go to cuBLAS; a bad index is undefined behaviour on CUDA (the CPU kernels check).
// Reentrant: calls may run concurrently on different streams.
#pragma once

#include <tessel/plugin.h>

namespace tessel::rgnn {

// The kernel_state of every CUDA kernel: a pool of cuBLAS handles per (device, stream), one per call.
// Owned by the plugin (static storage), valid while the plugin is loaded.
void* CudaState();

tessel_status* TypedLinearFwdCuda(void* state, const tessel_kernel_call* call);
tessel_status* TypedLinearBwdCuda(void* state, const tessel_kernel_call* call);
tessel_status* TypedEmbedFwdCuda(void* state, const tessel_kernel_call* call);
tessel_status* TypedEmbedBwdCuda(void* state, const tessel_kernel_call* call);
tessel_status* AggregateFwdCuda(void* state, const tessel_kernel_call* call);
tessel_status* AggregateBwdCuda(void* state, const tessel_kernel_call* call);
tessel_status* ReluFwdCuda(void* state, const tessel_kernel_call* call);
tessel_status* ReluBwdCuda(void* state, const tessel_kernel_call* call);
tessel_status* SoftmaxXentCuda(void* state, const tessel_kernel_call* call);
tessel_status* AdamStepCuda(void* state, const tessel_kernel_call* call);

}  // namespace tessel::rgnn

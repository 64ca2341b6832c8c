// llm.encoder.fwd/.bwd on CUDA. The tokens stay on the device and are not checked against V on the
// host (the CPU kernel does that); a token outside [0, V) is never read through: its row of Y becomes
// NaN, and the backward skips it. The backward sums in the CPU kernel's order, deterministically: one
// thread per column of dwte walks every position in order, one thread per (t, column) of dwpe walks the
// sequences in order.
#include "cuda_rows.cuh"
#include "kernels.h"

namespace tessel::kernels::llm {
namespace {

template <typename T>
__global__ void EncoderFwdKernel(const T* wte, const T* wpe, const int32_t* tokens, int64_t n, int64_t s, int64_t c,
                                 int64_t v, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * c; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / c, j = i % c;
    const int32_t token = tokens[r];
    y[i] = token >= 0 && token < v ? wte[token * c + j] + wpe[(r % s) * c + j] : QuietNaN(T(0));
  }
}

template <typename T>
__global__ void EncoderBwdWteKernel(const T* dy, const int32_t* tokens, int64_t n, int64_t c, int64_t v, T* dwte) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < c; j += int64_t(gridDim.x) * blockDim.x) {
    for (int64_t r = 0; r < n; ++r) {
      const int32_t token = tokens[r];
      if (token >= 0 && token < v) dwte[token * c + j] += dy[r * c + j];
    }
  }
}

template <typename T>
__global__ void EncoderBwdWpeKernel(const T* dy, int64_t b, int64_t s, int64_t c, T* dwpe) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < s * c; i += int64_t(gridDim.x) * blockDim.x) {
    T acc = dwpe[i];
    for (int64_t bi = 0; bi < b; ++bi) acc += dy[bi * s * c + i];
    dwpe[i] = acc;
  }
}

struct EncoderFwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_llm_encoder_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t v = kUnbound, c = kUnbound, p = kUnbound, b = kUnbound, s = kUnbound;
    const T* wte = args.In<T>(0, "wte", {&v, &c});
    const T* wpe = args.In<T>(1, "wpe", {&p, &c});
    const int32_t* tokens = args.In<int32_t>(2, "tokens", {&b, &s});
    T* y = args.Out<T>(0, "Y", {&b, &s, &c});
    CheckPositions(args, s, p);
    if (b * s * c == 0) return;
    EncoderFwdKernel<T><<<Blocks(b * s * c), kThreads, 0, StreamOf(args)>>>(wte, wpe, tokens, b * s, s, c, v, y);
    CheckLaunch("EncoderFwdKernel");
  }
};

struct EncoderBwdCuda {
  static const tessel_op_decl& Decl() { return tessel_op_llm_encoder_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    int64_t b = kUnbound, s = kUnbound, c = kUnbound, v = kUnbound, p = kUnbound;
    const T* dy = args.In<T>(0, "dY", {&b, &s, &c});
    const int32_t* tokens = args.In<int32_t>(1, "tokens", {&b, &s});
    T* dwte = args.Out<T>(0, "dwte", {&v, &c});
    T* dwpe = args.Out<T>(1, "dwpe", {&p, &c});
    CheckPositions(args, s, p);
    if (b * s * c == 0) return;
    cudaStream_t stream = StreamOf(args);
    EncoderBwdWteKernel<T><<<Blocks(c), kThreads, 0, stream>>>(dy, tokens, b * s, c, v, dwte);
    CheckLaunch("EncoderBwdWteKernel");
    EncoderBwdWpeKernel<T><<<Blocks(s * c), kThreads, 0, stream>>>(dy, b, s, c, dwpe);
    CheckLaunch("EncoderBwdWpeKernel");
  }
};

}  // namespace

TESSEL_DEFINE_UNBOUND_KERNEL(EncoderFwdCuda, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_UNBOUND_KERNEL(EncoderBwdCuda, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::llm

// llm.encoder.fwd/.bwd on CUDA (arguments: encoder_args.h). The tokens stay on the device and are not
// checked against V on the host (the CPU kernel's binder does that); a token outside [0, V) is never read
// through: its row of Y becomes NaN, and the backward skips it. The backward sums in the CPU kernel's
// order, deterministically: one thread per column of dwte walks every position in order, one thread per
// (t, column) of dwpe walks the sequences in order.
#include "cuda_rows.cuh"
#include "encoder_args.h"

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
  template <typename T>
  static void Run(const KernelArgs& args, const EncoderFwdArgs<T>& a) {
    const int64_t b = a.b, s = a.s, c = a.c;
    if (b * s * c == 0) return;
    EncoderFwdKernel<T>
        <<<Blocks(b * s * c), kThreads, 0, StreamOf(args)>>>(a.wte, a.wpe, a.tokens, b * s, s, c, a.v, a.y);
    CheckLaunch("EncoderFwdKernel");
  }
};

struct EncoderBwdCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const EncoderBwdArgs<T>& a) {
    const int64_t b = a.b, s = a.s, c = a.c;
    if (b * s * c == 0) return;
    cudaStream_t stream = StreamOf(args);
    EncoderBwdWteKernel<T><<<Blocks(c), kThreads, 0, stream>>>(a.dy, a.tokens, b * s, c, a.v, a.dwte);
    CheckLaunch("EncoderBwdWteKernel");
    EncoderBwdWpeKernel<T><<<Blocks(s * c), kThreads, 0, stream>>>(a.dy, b, s, c, a.dwpe);
    CheckLaunch("EncoderBwdWpeKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(EncoderFwdCuda, EncoderFwdArgs, TESSEL_DEVICE_CUDA)
TESSEL_DEFINE_KERNEL(EncoderBwdCuda, EncoderBwdArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::llm

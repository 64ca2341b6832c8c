// nn.softmax_xent.fwd_bwd on CUDA: one block per row (a GPT-2 vocabulary is 50,257 wide: one thread per
// row left a step's head to a few hundred threads), log-sum-exp in double; then one block sums the
// per-row results in a fixed order, so the loss is deterministic (arguments: softmax_xent_args.h). bf16
// logits are read exactly (as f32) and each gradient is rounded as the CPU kernel rounds it: to f32, then
// to bf16.
#include <cmath>

#include "cuda_support.h"
#include "softmax_xent_args.h"

namespace tessel::kernels::nn {
namespace {

constexpr int kReduceThreads = 512;
constexpr int kRowThreads = 256;  // a power of two: the tree reductions halve it

// Rows in a grid-stride loop, a block each. Three strided passes over the row, each thread in increasing
// column order: the max and its first column (ties go to the lower column, as the CPU kernel's
// strictly-greater scan), the sum of exp(z - max), then the gradient; the first two end in a tree
// reduction in shared memory (a fixed order: deterministic). In place (dlogits == logits, the fused
// classifier) is safe: every read of the row but each thread's own last one precedes the barrier before
// the first write, and the last pass reads and writes each element in the same thread.
template <typename T>
__global__ void XentRowsKernel(const T* logits, const int64_t* labels, const uint8_t* mask, double scale, int64_t n,
                               int64_t c, T* dlogits, double* row_loss, int64_t* row_correct) {
  __shared__ double red[kRowThreads];
  __shared__ int64_t arg[kRowThreads];
  const int t = threadIdx.x;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {  // i is the same in every thread of the block
    const T* z = logits + i * c;
    T* dz = dlogits + i * c;
    const int64_t label = labels[i];
    // A label beyond the classes would read out of the row: treat it like an unlabelled row.
    if (mask[i] == 0 || label < 0 || label >= c) {
      for (int64_t j = t; j < c; j += blockDim.x) dz[j] = FromAccumulate<T>(Accumulate<T>(0));
      if (t == 0) row_loss[i] = 0, row_correct[i] = 0;
      continue;
    }
    double best = -INFINITY;
    int64_t best_j = c;  // above every column: a thread without columns loses every tie
    for (int64_t j = t; j < c; j += blockDim.x) {
      const double v = static_cast<double>(ToAccumulate(z[j]));
      if (v > best) best = v, best_j = j;
    }
    const double z_label = t == 0 ? static_cast<double>(ToAccumulate(z[label])) : 0.0;
    red[t] = best, arg[t] = best_j;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
      if (t < stride) {
        const double b = red[t + stride];
        const int64_t jb = arg[t + stride];
        if (b > red[t] || (b == red[t] && jb < arg[t])) red[t] = b, arg[t] = jb;
      }
      __syncthreads();
    }
    const double zmax = red[0];
    const int64_t argmax = arg[0] < c ? arg[0] : 0;
    __syncthreads();  // every thread has read red[0] before it is overwritten
    double sum = 0;
    for (int64_t j = t; j < c; j += blockDim.x) sum += exp(static_cast<double>(ToAccumulate(z[j])) - zmax);
    red[t] = sum;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
      if (t < stride) red[t] += red[t + stride];
      __syncthreads();
    }
    const double lse = zmax + log(red[0]);
    if (t == 0) {
      row_loss[i] = lse - z_label;
      row_correct[i] = argmax == label ? 1 : 0;
    }
    __syncthreads();  // the row's reads, and red[0]'s, before the first write of dz (which may be z)
    for (int64_t j = t; j < c; j += blockDim.x) {
      const double g = (exp(static_cast<double>(ToAccumulate(z[j])) - lse) - (j == label ? 1.0 : 0.0)) * scale;
      dz[j] = FromAccumulate<T>(static_cast<Accumulate<T>>(g));
    }
  }
}

// One block: each thread sums a strided slice in order, then a tree reduction in shared memory.
__global__ void XentReduceKernel(const double* row_loss, const int64_t* row_correct, int64_t n, double* loss_sum,
                                 int64_t* correct) {
  __shared__ double loss_part[kReduceThreads];
  __shared__ int64_t correct_part[kReduceThreads];
  double loss = 0;
  int64_t hits = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    loss += row_loss[i];
    hits += row_correct[i];
  }
  loss_part[threadIdx.x] = loss;
  correct_part[threadIdx.x] = hits;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      loss_part[threadIdx.x] += loss_part[threadIdx.x + stride];
      correct_part[threadIdx.x] += correct_part[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *loss_sum = loss_part[0];
    *correct = correct_part[0];
  }
}

struct SoftmaxXentCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const SoftmaxXentArgs<T>& a) {
    const int64_t n = a.n;
    cudaStream_t stream = StreamOf(args);
    Workspace<double> row_loss(args, n);
    Workspace<int64_t> row_correct(args, n);
    if (n > 0) {
      const int blocks = static_cast<int>(n < (int64_t{1} << 16) ? n : (int64_t{1} << 16));
      XentRowsKernel<T><<<blocks, kRowThreads, 0, stream>>>(a.logits, a.labels, a.mask, a.scale, n, a.c, a.dlogits,
                                                            row_loss.get(), row_correct.get());
      CheckLaunch("XentRowsKernel");
    }
    XentReduceKernel<<<1, kReduceThreads, 0, stream>>>(row_loss.get(), row_correct.get(), n, a.loss_sum, a.correct);
    CheckLaunch("XentReduceKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL_BF16(SoftmaxXentCuda, SoftmaxXentArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn

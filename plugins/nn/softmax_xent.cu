// nn.softmax_xent.fwd_bwd on CUDA: one thread per row (log-sum-exp in double), then one block sums the
// per-row results in a fixed order, so the loss is deterministic (arguments: softmax_xent_args.h).
#include "cuda_support.h"
#include "softmax_xent_args.h"

namespace tessel::kernels::nn {
namespace {

constexpr int kReduceThreads = 512;

template <typename T>
__global__ void XentRowsKernel(const T* logits, const int64_t* labels, const uint8_t* mask, double scale,
                               int64_t n, int64_t c, T* dlogits, double* row_loss, int64_t* row_correct) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T* z = logits + i * c;
    T* dz = dlogits + i * c;
    const int64_t label = labels[i];
    // A label beyond the classes would read out of the row: treat it like an unlabelled row.
    if (mask[i] == 0 || label < 0 || label >= c) {
      for (int64_t j = 0; j < c; ++j) dz[j] = T(0);
      row_loss[i] = 0;
      row_correct[i] = 0;
      continue;
    }
    int64_t argmax = 0;
    for (int64_t j = 1; j < c; ++j) {
      if (z[j] > z[argmax]) argmax = j;
    }
    const double zmax = static_cast<double>(z[argmax]);
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += exp(static_cast<double>(z[j]) - zmax);
    const double lse = zmax + log(sum);
    row_loss[i] = lse - static_cast<double>(z[label]);
    row_correct[i] = argmax == label ? 1 : 0;
    const double s = scale;
    for (int64_t j = 0; j < c; ++j) {
      dz[j] = static_cast<T>((exp(static_cast<double>(z[j]) - lse) - (j == label ? 1.0 : 0.0)) * s);
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
      XentRowsKernel<T><<<Blocks(n), kThreads, 0, stream>>>(a.logits, a.labels, a.mask, a.scale, n, a.c, a.dlogits,
                                                            row_loss.get(), row_correct.get());
      CheckLaunch("XentRowsKernel");
    }
    XentReduceKernel<<<1, kReduceThreads, 0, stream>>>(row_loss.get(), row_correct.get(), n, a.loss_sum, a.correct);
    CheckLaunch("XentReduceKernel");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(SoftmaxXentCuda, SoftmaxXentArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::nn

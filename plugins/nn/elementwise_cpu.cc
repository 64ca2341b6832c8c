// nn.add, nn.cast and nn.sum_squares on CPU, in chunks on the host's pool. sum_squares accumulates in double over
// chunks of a fixed size (not a share of the threads), then adds the chunks' sums in order: the same
// bits at every thread count, which a gradient norm that decides clipping needs. Arguments:
// elementwise_args.h.
#include <algorithm>
#include <vector>

#include "elementwise_args.h"

namespace tessel::kernels::nn {
namespace {

constexpr int64_t kElementGrain = 1 << 15;
// Elements per partial sum of sum_squares.
constexpr int64_t kSumChunk = 1 << 16;

struct AddCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const AddArgs<T>& t) {
    const T* a = t.a;
    const T* b = t.b;
    T* c = t.c;
    // No restrict: C may be A or B, and each element is read before it is written.
    args.ParallelFor(t.n, kElementGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) c[i] = FromAccumulate<T>(ToAccumulate(a[i]) + ToAccumulate(b[i]));
    });
  }
};

struct CastCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const CastArgs<T>& a) {
    const Accumulate<T>* x = a.x;
    T* y = a.y;
    args.ParallelFor(a.n, kElementGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) y[i] = FromAccumulate<T>(x[i]);
    });
  }
};

// sum x[i]^2 in double, in 8 partial sums (i mod 8) added in order at the end.
template <typename T>
double SumSquaresSpan(int64_t n, const T* x) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const double v = static_cast<double>(x[i + j]);
      acc[j] += v * v;
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    const double v = static_cast<double>(x[i]);
    acc[j] += v * v;
  }
  double sum = acc[0];
  for (int j = 1; j < 8; ++j) sum += acc[j];
  return sum;
}

struct SumSquaresCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const SumSquaresArgs<T>& a) {
    const int64_t n = a.n;
    const T* x = a.x;
    const int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
    std::vector<double> partial(static_cast<size_t>(chunks));
    args.ParallelFor(chunks, 1, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t i0 = j * kSumChunk;
        partial[static_cast<size_t>(j)] = SumSquaresSpan(std::min(kSumChunk, n - i0), x + i0);
      }
    });
    double sum = 0;
    for (double p : partial) sum += p;
    a.s[0] = sum;
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL_BF16(AddCpu, AddArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL_BF16(CastCpu, CastArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(SumSquaresCpu, SumSquaresArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn

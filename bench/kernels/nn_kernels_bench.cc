// Micro-benchmarks of the GPT ops of libtessel_nn.so (nn.linear, nn.gelu_tanh, nn.add, nn.sum_squares,
// optim.adamw.step), through the registry as a worker calls them, f32, on a host pool of kThreads
// threads. nn.linear runs at N = 2048 rows on GPT-2-small-like (K, O) shapes, beside its limit measured in
// the same run: plain cblas_sgemm of the same products with OpenBLAS's own kThreads threads.
//   build/bench/nn_kernels_bench [--benchmark_format=json] [--benchmark_filter=Linear]
// Compare the FLOP/s counters of BM_LinearFwd/K/O with BM_SgemmLimitFwd/K/O (and Bwd). Not run by ctest:
// timings need a quiet machine.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::bench {
namespace {

using workers::Kernel;
using workers::KernelRegistry;

// The pool's threads, and OpenBLAS's for the limit: the same count, as bench/README.md's limits use.
constexpr int kThreads = 2;
// Rows of the activations in the linear benchmarks (a GPT micro-batch of B * T tokens).
constexpr int64_t kRows = 2048;
// Elements of the elementwise benchmarks: a 124M-parameter model's 1/4, well past the caches.
constexpr int64_t kElements = int64_t{1} << 25;

struct Fixture {
  KernelRegistry registry{Logger("bench", LogLevel::kWarn)};
  ThreadPool pool{kThreads};
  Fixture() {
    const std::string path = std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_nn.so";
    if (Status st = registry.LoadPlugin(path); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      std::exit(4);
    }
  }
};

Fixture& Shared() {
  static Fixture fixture;
  return fixture;
}

// A host buffer and a Tensor view of it, kept together.
template <typename T>
struct Buffer {
  std::vector<T> data;
  Tensor tensor;
  explicit Buffer(std::vector<int64_t> shape, double lo = -1, double hi = 1) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    data.resize(static_cast<size_t>(n));
    std::mt19937_64 rng(n);
    std::uniform_real_distribution<double> dist(lo, hi);
    for (T& v : data) v = static_cast<T>(dist(rng));
    tensor = Tensor::Borrow(data.data(), DTypeOf<T>(), std::move(shape));
  }
};

void Run(benchmark::State& state, const char* op, const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
         const void* params = nullptr, size_t params_size = 0) {
  Fixture& f = Shared();
  Result<const Kernel*> kernel = f.registry.Find(op, Device::kCpu);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().message().c_str());
    return;
  }
  for (auto _ : state) {
    if (Status st = (*kernel)->Call(in, out, workers::CallOptions{&f.pool}, params, params_size); !st.ok()) {
      state.SkipWithError(st.message().c_str());
      return;
    }
  }
}

void Flops(benchmark::State& state, double per_call) {
  state.counters["FLOP/s"] = benchmark::Counter(per_call, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_LinearFwd(benchmark::State& state) {
  const int64_t k = state.range(0), o = state.range(1);
  Buffer<float> x({kRows, k}), w({o, k}), b({o}), y({kRows, o});
  Run(state, "nn.linear.fwd", {&x.tensor, &w.tensor, &b.tensor}, {&y.tensor});
  Flops(state, 2.0 * kRows * k * o);
}

void BM_LinearBwd(benchmark::State& state) {
  const int64_t k = state.range(0), o = state.range(1);
  Buffer<float> dy({kRows, o}), x({kRows, k}), w({o, k}), dx({kRows, k}), dw({o, k}), db({o});
  Run(state, "nn.linear.bwd", {&dy.tensor, &x.tensor, &w.tensor}, {&dx.tensor, &dw.tensor, &db.tensor});
  Flops(state, 4.0 * kRows * k * o);  // dX and dW; db's column sums are not counted
}

// The limit: the same products as one cblas_sgemm each, OpenBLAS threading them itself. The plugin set
// OpenBLAS to one thread when it loaded (the pool is its parallelism); restored afterwards.
class OpenBlasThreads {
 public:
  OpenBlasThreads() {
    Shared();  // the plugin's init runs first, so that it does not undo this
    openblas_set_num_threads(kThreads);
  }
  ~OpenBlasThreads() { openblas_set_num_threads(1); }
};

void BM_SgemmLimitFwd(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), o = static_cast<int>(state.range(1)), n = kRows;
  Buffer<float> x({n, k}), w({o, k}), y({n, o});
  OpenBlasThreads threads;
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, o, k, 1.f, x.data.data(), k, w.data.data(), k, 1.f,
                y.data.data(), o);
  }
  Flops(state, 2.0 * n * k * o);
}

void BM_SgemmLimitBwd(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), o = static_cast<int>(state.range(1)), n = kRows;
  Buffer<float> dy({n, o}), x({n, k}), w({o, k}), dx({n, k}), dw({o, k});
  OpenBlasThreads threads;
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, o, 1.f, dy.data.data(), o, w.data.data(), k, 0.f,
                dx.data.data(), k);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o, k, n, 1.f, dy.data.data(), o, x.data.data(), k, 1.f,
                dw.data.data(), k);
  }
  Flops(state, 4.0 * n * k * o);
}

void BM_GeluTanhFwd(benchmark::State& state) {
  Buffer<float> x({kElements / 1024, 1024}, -4, 4), y({kElements / 1024, 1024});
  Run(state, "nn.gelu_tanh.fwd", {&x.tensor}, {&y.tensor});
  state.SetItemsProcessed(state.iterations() * kElements);
}

void BM_GeluTanhBwd(benchmark::State& state) {
  Buffer<float> dy({kElements / 1024, 1024}), x({kElements / 1024, 1024}, -4, 4), dx({kElements / 1024, 1024});
  Run(state, "nn.gelu_tanh.bwd", {&dy.tensor, &x.tensor}, {&dx.tensor});
  state.SetItemsProcessed(state.iterations() * kElements);
}

void BM_AddInPlace(benchmark::State& state) {
  Buffer<float> a({kElements}), b({kElements}, -1e-6, 1e-6);
  Run(state, "nn.add", {&a.tensor, &b.tensor}, {&a.tensor});
  state.SetBytesProcessed(state.iterations() * kElements * 3 * static_cast<int64_t>(sizeof(float)));
}

void BM_SumSquares(benchmark::State& state) {
  Buffer<float> x({kElements});
  Buffer<double> s({1});
  Run(state, "nn.sum_squares", {&x.tensor}, {&s.tensor});
  state.SetBytesProcessed(state.iterations() * kElements * static_cast<int64_t>(sizeof(float)));
}

void BM_AdamwStep(benchmark::State& state) {
  Buffer<float> param({kElements}), grad({kElements}), m({kElements}, 0, 0), v({kElements}, 0, 0);
  const tessel_adamw_params params{sizeof(tessel_adamw_params), 6e-4, 0.9, 0.95, 1e-8, 0.1, 1.0, 1};
  Run(state, "optim.adamw.step", {&param.tensor, &grad.tensor, &m.tensor, &v.tensor}, {}, &params, sizeof(params));
  // param, m and v read and written, grad read.
  state.SetBytesProcessed(state.iterations() * kElements * 7 * static_cast<int64_t>(sizeof(float)));
}

// (K, O) of GPT-2 small's products at C = 256: the attention projection (C, 3C), the output projection
// (C, C), the MLP's up (C, 4C) and down (4C, C) projections.
#define TESSEL_LINEAR_BENCH(fn)       \
  BENCHMARK(fn)                       \
      ->Args({256, 768})              \
      ->Args({256, 256})              \
      ->Args({256, 1024})             \
      ->Args({1024, 256})             \
      ->Unit(benchmark::kMillisecond) \
      ->UseRealTime()
TESSEL_LINEAR_BENCH(BM_LinearFwd);
TESSEL_LINEAR_BENCH(BM_SgemmLimitFwd);
TESSEL_LINEAR_BENCH(BM_LinearBwd);
TESSEL_LINEAR_BENCH(BM_SgemmLimitBwd);
BENCHMARK(BM_GeluTanhFwd)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GeluTanhBwd)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AddInPlace)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SumSquares)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AdamwStep)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tessel::bench

BENCHMARK_MAIN();

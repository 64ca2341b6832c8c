// Micro-benchmarks of every op of libtessel_llm.so at two GPT-2 shapes, through the registry as a
// worker calls them: small (B 8, S 256, C 256, H 4) and GPT-2 124M's (B 4, S 1024, C 768, H 12). f32;
// the host pool has one thread per core; the time per call is the benchmark's "Time" column, and the CPU
// time of all the process's threads per call is the proc_cpu_ms counter.
//   build/bench/llm_kernels_bench [--benchmark_format=json] [--benchmark_filter=Attention]
// Not run by ctest: timings need a quiet machine.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <tessel/ops/llm.h>

#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::bench {
namespace {

using workers::Kernel;
using workers::KernelRegistry;

struct Fixture {
  KernelRegistry registry{Logger("bench", LogLevel::kWarn)};
  ThreadPool pool{static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
  Fixture() {
    const std::string path = std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_llm.so";
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

// The two shapes, by the benchmark's argument.
struct Gpt {
  int64_t b, s, c, h;
  int64_t n() const { return b * s; }
};
Gpt ShapeOf(const benchmark::State& state) { return state.range(0) == 0 ? Gpt{8, 256, 256, 4} : Gpt{4, 1024, 768, 12}; }
void Label(benchmark::State& state, const Gpt& g) {
  state.SetLabel("B" + std::to_string(g.b) + " S" + std::to_string(g.s) + " C" + std::to_string(g.c) + " H" +
                 std::to_string(g.h));
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

// User + system CPU time of the whole process (every thread), in seconds.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + 1e-6 * static_cast<double>(tv.tv_usec);
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

void Run(benchmark::State& state, const char* op, const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
         const void* params = nullptr, size_t params_size = 0) {
  Fixture& f = Shared();
  Result<const Kernel*> kernel = f.registry.Find(op, Device::kCpu);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().message().c_str());
    return;
  }
  const double cpu_before = ProcessCpuSeconds();
  for (auto _ : state) {
    if (Status st = (*kernel)->Call(in, out, workers::CallOptions{&f.pool}, params, params_size); !st.ok()) {
      state.SkipWithError(st.message().c_str());
      return;
    }
  }
  // The CPU time of every thread of the process per call, in ms: on a machine shared with other work it
  // moves less than the wall time, which counts the time the pool's threads wait for a core.
  state.counters["proc_cpu_ms"] =
      benchmark::Counter(1e3 * (ProcessCpuSeconds() - cpu_before), benchmark::Counter::kAvgIterations);
}

void Flops(benchmark::State& state, double per_call) {
  state.counters["FLOP/s"] = benchmark::Counter(per_call, benchmark::Counter::kIsIterationInvariantRate);
}

// The products of causal attention: QK^T and PV over the lower triangle, 2 S^2/2 hs each per (b, h).
double AttentionFlops(const Gpt& g) { return 2.0 * 2.0 * g.b * g.h * (g.s * (g.s + 1) / 2.0) * (g.c / g.h); }

void BM_AttentionFwd(benchmark::State& state) {
  const Gpt g = ShapeOf(state);
  Buffer<float> qkv({g.b, g.s, 3 * g.c}, -2, 2), y({g.b, g.s, g.c}), lse({g.b, g.h, g.s});
  const tessel_attention_params params{sizeof(tessel_attention_params), static_cast<int32_t>(g.h)};
  Run(state, "llm.attention.fwd", {&qkv.tensor}, {&y.tensor, &lse.tensor}, &params, sizeof(params));
  Flops(state, AttentionFlops(g));
  Label(state, g);
}

void BM_AttentionBwd(benchmark::State& state) {
  const Gpt g = ShapeOf(state);
  Buffer<float> qkv({g.b, g.s, 3 * g.c}, -2, 2), y({g.b, g.s, g.c}), lse({g.b, g.h, g.s});
  Buffer<float> dy({g.b, g.s, g.c}), dqkv({g.b, g.s, 3 * g.c});
  const tessel_attention_params params{sizeof(tessel_attention_params), static_cast<int32_t>(g.h)};
  const Kernel* fwd = Shared().registry.Find("llm.attention.fwd", Device::kCpu).value();
  if (Status st = fwd->Call({&qkv.tensor}, {&y.tensor, &lse.tensor}, workers::CallOptions{&Shared().pool}, &params,
                            sizeof(params));
      !st.ok()) {
    state.SkipWithError(st.message().c_str());
    return;
  }
  Run(state, "llm.attention.bwd", {&dy.tensor, &qkv.tensor, &y.tensor, &lse.tensor}, {&dqkv.tensor}, &params,
      sizeof(params));
  Flops(state, 2.5 * AttentionFlops(g));  // QK^T again, dY V^T, dS K, dS^T Q, P^T dY
  Label(state, g);
}

void BM_LayernormFwd(benchmark::State& state) {
  const Gpt g = ShapeOf(state);
  Buffer<float> x({g.n(), g.c}), w({g.c}), b({g.c}), y({g.n(), g.c}), mean({g.n()}), rstd({g.n()});
  const tessel_layernorm_params params{sizeof(tessel_layernorm_params), 1e-5};
  Run(state, "llm.layernorm.fwd", {&x.tensor, &w.tensor, &b.tensor}, {&y.tensor, &mean.tensor, &rstd.tensor}, &params,
      sizeof(params));
  state.SetBytesProcessed(state.iterations() * g.n() * g.c * 2 * static_cast<int64_t>(sizeof(float)));
  Label(state, g);
}

void BM_LayernormBwd(benchmark::State& state) {
  const Gpt g = ShapeOf(state);
  Buffer<float> dy({g.n(), g.c}), x({g.n(), g.c}), w({g.c}), mean({g.n()}, -0.1, 0.1), rstd({g.n()}, 0.5, 2);
  Buffer<float> dx({g.n(), g.c}), dw({g.c}), db({g.c});
  Run(state, "llm.layernorm.bwd", {&dy.tensor, &x.tensor, &w.tensor, &mean.tensor, &rstd.tensor},
      {&dx.tensor, &dw.tensor, &db.tensor});
  state.SetBytesProcessed(state.iterations() * g.n() * g.c * 4 * static_cast<int64_t>(sizeof(float)));
  Label(state, g);
}

constexpr int64_t kVocab = 50257;

void BM_EncoderFwd(benchmark::State& state) {
  const Gpt g = ShapeOf(state);
  Buffer<float> wte({kVocab, g.c}), wpe({g.s, g.c}), y({g.b, g.s, g.c});
  Buffer<int32_t> tokens({g.b, g.s});
  for (size_t i = 0; i < tokens.data.size(); ++i) tokens.data[i] = static_cast<int32_t>((i * 7919) % kVocab);
  Run(state, "llm.encoder.fwd", {&wte.tensor, &wpe.tensor, &tokens.tensor}, {&y.tensor});
  state.SetBytesProcessed(state.iterations() * g.n() * g.c * 3 * static_cast<int64_t>(sizeof(float)));
  Label(state, g);
}

void BM_EncoderBwd(benchmark::State& state) {
  const Gpt g = ShapeOf(state);
  Buffer<float> dy({g.b, g.s, g.c}), dwte({kVocab, g.c}), dwpe({g.s, g.c});
  Buffer<int32_t> tokens({g.b, g.s});
  for (size_t i = 0; i < tokens.data.size(); ++i) tokens.data[i] = static_cast<int32_t>((i * 7919) % kVocab);
  Run(state, "llm.encoder.bwd", {&dy.tensor, &tokens.tensor}, {&dwte.tensor, &dwpe.tensor});
  state.SetBytesProcessed(state.iterations() * g.n() * g.c * 5 * static_cast<int64_t>(sizeof(float)));
  Label(state, g);
}

#define TESSEL_LLM_BENCH(fn) BENCHMARK(fn)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()
TESSEL_LLM_BENCH(BM_AttentionFwd);
TESSEL_LLM_BENCH(BM_AttentionBwd);
TESSEL_LLM_BENCH(BM_LayernormFwd);
TESSEL_LLM_BENCH(BM_LayernormBwd);
TESSEL_LLM_BENCH(BM_EncoderFwd);
TESSEL_LLM_BENCH(BM_EncoderBwd);

}  // namespace
}  // namespace tessel::bench

BENCHMARK_MAIN();

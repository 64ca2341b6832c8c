// Micro-benchmarks of every op of libtessel_rgnn.so and libtessel_nn.so on an AIFB-sized graph, through the registry as
// a worker calls them. D (hidden size) is 16 or 64; f32; the host pool has one thread per core.
//   build/bench/rgnn_kernels_bench [--benchmark_format=json] [--benchmark_filter=Aggregate]
// Not run by ctest: timings need a quiet machine.
#include <benchmark/benchmark.h>
#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>

#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "aifb_like_graph.h"
#include "core/thread_pool.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::bench {
namespace {

using workers::Kernel;
using workers::KernelRegistry;

constexpr int64_t kClasses = 4;

struct Fixture {
  KernelRegistry registry{Logger("bench", LogLevel::kWarn)};
  ThreadPool pool{static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
  WorkerGraph graph = AifbLikeGraph();
  Fixture() {
    for (const char* name : {"libtessel_nn.so", "libtessel_rgnn.so"}) {
      const std::string path = std::string(TESSEL_BINARY_DIR) + "/plugins/" + name;
      if (Status st = registry.LoadPlugin(path); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.ToString().c_str());
        std::exit(4);
      }
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
  Buffer(std::vector<int64_t> shape, double lo = -1, double hi = 1) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    data.resize(static_cast<size_t>(n));
    std::mt19937_64 rng(n);
    std::uniform_real_distribution<double> dist(lo, hi);
    for (T& v : data) v = static_cast<T>(dist(rng));
    tensor = Tensor::Borrow(data.data(), DTypeOf<T>(), std::move(shape));
  }
  Buffer(std::vector<int64_t> shape, std::vector<T> values) : data(std::move(values)) {
    tensor = Tensor::Borrow(data.data(), DTypeOf<T>(), std::move(shape));
  }
};

Buffer<int64_t> Index(const std::vector<int64_t>& v) { return Buffer<int64_t>({static_cast<int64_t>(v.size())}, v); }

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

void BM_TypedLinearFwd(benchmark::State& state) {
  const WorkerGraph& g = Shared().graph;
  const int64_t d = state.range(0);
  Buffer<float> x({g.num_nodes, d}), w({g.num_relations, d, d}), y({g.num_uniq(), d});
  auto ptr = Index(g.uniq_ptr), src = Index(g.uniq_src);
  Run(state, "rgnn.typed_linear.fwd", {&x.tensor, &w.tensor, &ptr.tensor, &src.tensor}, {&y.tensor});
  Flops(state, 2.0 * g.num_uniq() * d * d);
}

void BM_TypedLinearBwd(benchmark::State& state) {
  const WorkerGraph& g = Shared().graph;
  const int64_t d = state.range(0);
  Buffer<float> dy({g.num_uniq(), d}), x({g.num_nodes, d}), w({g.num_relations, d, d});
  Buffer<float> dx({g.num_nodes, d}), dw({g.num_relations, d, d});
  auto ptr = Index(g.uniq_ptr), src = Index(g.uniq_src);
  Run(state, "rgnn.typed_linear.bwd", {&dy.tensor, &x.tensor, &w.tensor, &ptr.tensor, &src.tensor},
      {&dx.tensor, &dw.tensor});
  Flops(state, 4.0 * g.num_uniq() * d * d);
}

void BM_TypedEmbedFwd(benchmark::State& state) {
  const WorkerGraph& g = Shared().graph;
  const int64_t d = state.range(0);
  std::vector<int64_t> ids(static_cast<size_t>(g.num_nodes));
  for (int64_t i = 0; i < g.num_nodes; ++i) ids[i] = i;
  Buffer<float> w({g.num_relations, g.num_nodes, d}), y({g.num_uniq(), d});
  auto ptr = Index(g.uniq_ptr), src = Index(g.uniq_src), row_id = Index(ids);
  Run(state, "rgnn.typed_embed.fwd", {&w.tensor, &ptr.tensor, &src.tensor, &row_id.tensor}, {&y.tensor});
  state.SetBytesProcessed(state.iterations() * g.num_uniq() * d * 2 * static_cast<int64_t>(sizeof(float)));
}

void BM_TypedEmbedBwd(benchmark::State& state) {
  const WorkerGraph& g = Shared().graph;
  const int64_t d = state.range(0);
  std::vector<int64_t> ids(static_cast<size_t>(g.num_nodes));
  for (int64_t i = 0; i < g.num_nodes; ++i) ids[i] = i;
  Buffer<float> dy({g.num_uniq(), d}), dw({g.num_relations, g.num_nodes, d});
  auto ptr = Index(g.uniq_ptr), src = Index(g.uniq_src), row_id = Index(ids);
  Run(state, "rgnn.typed_embed.bwd", {&dy.tensor, &ptr.tensor, &src.tensor, &row_id.tensor}, {&dw.tensor});
  // Dominated by zeroing dW: report the bytes written.
  state.SetBytesProcessed(state.iterations() * g.num_relations * g.num_nodes * d * static_cast<int64_t>(sizeof(float)));
}

void BM_AggregateFwd(benchmark::State& state) {
  const WorkerGraph& g = Shared().graph;
  const int64_t d = state.range(0);
  Buffer<float> y({g.num_uniq(), d}), h({g.num_nodes, d});
  Buffer<float> norm({g.num_edges()}, std::vector<float>(g.norm.begin(), g.norm.end()));
  auto eu = Index(g.edge_uniq), dp = Index(g.dst_ptr), de = Index(g.dst_edges);
  Run(state, "rgnn.aggregate.fwd", {&y.tensor, &eu.tensor, &norm.tensor, &dp.tensor, &de.tensor}, {&h.tensor});
  state.SetItemsProcessed(state.iterations() * g.num_edges());
  Flops(state, 2.0 * g.num_edges() * d);
}

void BM_AggregateBwd(benchmark::State& state) {
  const WorkerGraph& g = Shared().graph;
  const int64_t d = state.range(0);
  Buffer<float> dh({g.num_nodes, d}), dy({g.num_uniq(), d});
  Buffer<float> norm({g.num_edges()}, std::vector<float>(g.norm.begin(), g.norm.end()));
  auto dst = Index(g.dst), uep = Index(g.uniq_edge_ptr);
  Run(state, "rgnn.aggregate.bwd", {&dh.tensor, &dst.tensor, &norm.tensor, &uep.tensor}, {&dy.tensor});
  state.SetItemsProcessed(state.iterations() * g.num_edges());
  Flops(state, 2.0 * g.num_edges() * d);
}

void BM_ReluFwd(benchmark::State& state) {
  const int64_t n = Shared().graph.num_nodes, d = state.range(0);
  Buffer<float> x({n, d}), y({n, d});
  Run(state, "nn.relu.fwd", {&x.tensor}, {&y.tensor});
  state.SetBytesProcessed(state.iterations() * n * d * 2 * static_cast<int64_t>(sizeof(float)));
}

void BM_ReluBwd(benchmark::State& state) {
  const int64_t n = Shared().graph.num_nodes, d = state.range(0);
  Buffer<float> dy({n, d}), y({n, d}), dx({n, d});
  Run(state, "nn.relu.bwd", {&dy.tensor, &y.tensor}, {&dx.tensor});
  state.SetBytesProcessed(state.iterations() * n * d * 3 * static_cast<int64_t>(sizeof(float)));
}

void BM_SoftmaxXent(benchmark::State& state) {
  const int64_t n = Shared().graph.num_nodes;
  Buffer<float> logits({n, kClasses}), dlogits({n, kClasses});
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = i % 7 == 0 ? i % kClasses : -1;  // AIFB labels about 2% of its nodes; be generous
    mask[i] = 1;
  }
  auto lab = Index(labels);
  Buffer<uint8_t> msk({n}, mask);
  Buffer<double> loss({1}, std::vector<double>{0.0});
  Buffer<int64_t> correct({1}, std::vector<int64_t>{0});
  const tessel_softmax_xent_params params{sizeof(tessel_softmax_xent_params), 1.0};
  Run(state, "nn.softmax_xent.fwd_bwd", {&logits.tensor, &lab.tensor, &msk.tensor},
      {&loss.tensor, &correct.tensor, &dlogits.tensor}, &params, sizeof(params));
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_AdamStep(benchmark::State& state) {
  const int64_t d = state.range(0), p = Shared().graph.num_relations * d * d;
  Buffer<float> param({p}), grad({p}), m({p}, 0, 0), v({p}, 0, 0);
  const tessel_adam_params params{sizeof(tessel_adam_params), 0.01, 0.9, 0.999, 1e-8, 5e-4, 1};
  Run(state, "optim.adam.step", {&param.tensor, &grad.tensor, &m.tensor, &v.tensor}, {}, &params, sizeof(params));
  state.SetItemsProcessed(state.iterations() * p);
}

#define TESSEL_KERNEL_BENCH(fn) BENCHMARK(fn)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond)->UseRealTime()
TESSEL_KERNEL_BENCH(BM_TypedLinearFwd);
TESSEL_KERNEL_BENCH(BM_TypedLinearBwd);
TESSEL_KERNEL_BENCH(BM_TypedEmbedFwd);
TESSEL_KERNEL_BENCH(BM_TypedEmbedBwd);
TESSEL_KERNEL_BENCH(BM_AggregateFwd);
TESSEL_KERNEL_BENCH(BM_AggregateBwd);
TESSEL_KERNEL_BENCH(BM_ReluFwd);
TESSEL_KERNEL_BENCH(BM_ReluBwd);
TESSEL_KERNEL_BENCH(BM_AdamStep);
BENCHMARK(BM_SoftmaxXent)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace tessel::bench

BENCHMARK_MAIN();

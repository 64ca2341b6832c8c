// Helpers for the rgnn kernel tests: load libtessel_rgnn.so through the registry (as a worker does),
// random graphs in the worker layout, tensors, and tolerances. The expectations in the tests are
// computed by naive loops over the raw edge list, never by the kernels.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::rgnn_test {

std::string RgnnPluginPath();

// A registry with libtessel_rgnn.so loaded, shared by the tests of one binary (loaded on first use).
const workers::KernelRegistry& RgnnRegistry();

// Calls (op, cpu) and asserts success.
void CallCpu(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
             ThreadPool* pool);

// A random multi-relational graph, with the worker layout built from its raw edges.
struct GraphSpec {
  int64_t num_src_rows = 12;     // M: rows of the layer input (local + halo nodes)
  int64_t num_dst = 9;           // N: destination rows
  int64_t num_relations = 5;     // R; relation 1 is always empty
  int64_t num_edges = 40;        // E
  int64_t distinct_sources = 6;  // sources are drawn from this many rows, so pairs repeat
};

struct Graph {
  int64_t m = 0, n = 0, r = 0;
  // Raw edges, sorted by (relation, source, destination).
  std::vector<int64_t> rel, src, dst;
  std::vector<double> norm;
  // The worker layout (plugins/rgnn/rgnn_ops.h).
  std::vector<int64_t> uniq_ptr, uniq_src, edge_uniq, uniq_edge_ptr, dst_ptr, dst_edges;
  int64_t num_edges() const { return static_cast<int64_t>(src.size()); }
  int64_t num_uniq() const { return static_cast<int64_t>(uniq_src.size()); }
};

Graph RandomGraph(const GraphSpec& spec, uint64_t seed);

// Host memory for test tensors. It never gives memory back before the process ends: Tensor::Empty in
// core/tensor.cc frees a buffer from a temporary Buffer as well as from its owner (a double free, reported
// to core's owner), and a Free that does nothing keeps the tests independent of that bug.
Allocator& TestAllocator();

template <typename T>
Tensor MakeTensor(std::vector<int64_t> shape, const std::vector<T>& values) {
  Tensor t = Tensor::Empty(DTypeOf<T>(), std::move(shape), TestAllocator()).value();
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

template <typename T>
Tensor Filled(std::vector<int64_t> shape, T value) {
  Tensor t = Tensor::Empty(DTypeOf<T>(), std::move(shape), TestAllocator()).value();
  std::fill_n(t.data<T>(), t.numel(), value);
  return t;
}

template <typename T>
std::vector<T> ToVector(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

template <typename T>
std::vector<T> RandomValues(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> out(static_cast<size_t>(n));
  for (T& v : out) v = static_cast<T>(dist(rng));
  return out;
}

template <typename T>
std::vector<T> Cast(const std::vector<double>& values) {
  return std::vector<T>(values.begin(), values.end());
}

// Relative-with-floor tolerance by dtype: float accumulations of a few dozen terms, double to 1e-11.
template <typename T>
double Tolerance() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-11;
}

// Expects |a - b| <= tol * max(1, |b|) elementwise, reporting the first few mismatches by index.
template <typename T, typename U>
void ExpectNear(const std::vector<T>& actual, const std::vector<U>& expected, double tol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]), b = static_cast<double>(expected[i]);
    if (!(std::abs(a - b) <= tol * std::max(1.0, std::abs(b))) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << a << ", expected " << b;
    }
  }
}

// The relation of compact row u, by scanning uniq_ptr (independent of the kernels' blocking).
int64_t RelationOfUniq(const Graph& g, int64_t u);

// The worker-layout tensors of a graph.
struct GraphTensors {
  Tensor uniq_ptr, uniq_src, edge_uniq, uniq_edge_ptr, dst, dst_ptr, dst_edges;
  Tensor norm;  // in the dtype of the test
};

template <typename T>
GraphTensors ToTensors(const Graph& g) {
  GraphTensors t;
  t.uniq_ptr = MakeTensor<int64_t>({g.r + 1}, g.uniq_ptr);
  t.uniq_src = MakeTensor<int64_t>({g.num_uniq()}, g.uniq_src);
  t.edge_uniq = MakeTensor<int64_t>({g.num_edges()}, g.edge_uniq);
  t.uniq_edge_ptr = MakeTensor<int64_t>({g.num_uniq() + 1}, g.uniq_edge_ptr);
  t.dst = MakeTensor<int64_t>({g.num_edges()}, g.dst);
  t.dst_ptr = MakeTensor<int64_t>({g.n + 1}, g.dst_ptr);
  t.dst_edges = MakeTensor<int64_t>({g.num_edges()}, g.dst_edges);
  t.norm = MakeTensor<T>({g.num_edges()}, Cast<T>(g.norm));
  return t;
}

}  // namespace tessel::rgnn_test

// rgnn.rgcn.* and rgnn.rgcn_embed.* on CUDA against their CPU kernels, on fresh random inputs, in float and
// double, over layouts from one row per block (many short runs) to one block holding everything, with and
// without compaction; widths on either side of each other; a graph with more items than one chunk of the
// CUDA kernels (65536 rows) so that chunks split relations; and an edgeless graph. Skipped, with the reason,
// when Tessel was built without CUDA or no GPU is visible.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "segment_layout_util.h"

namespace tessel::kernel_test {
namespace {

const std::vector<std::string> kOps = {"rgnn.rgcn.fwd", "rgnn.rgcn.bwd", "rgnn.rgcn_embed.fwd", "rgnn.rgcn_embed.bwd"};

// Block sizes from one row per block to one block for the whole graph; compaction on and off.
const SegmentOptions kLayouts[] = {{1, 1, true},       {3, 4, true},  {16, 32, true},
                                   {1000, 1000, true}, {3, 4, false}, {64, 64, false}};

std::string Describe(const SegmentOptions& o) {
  return "blocks " + std::to_string(o.dst_block_rows) + "/" + std::to_string(o.src_block_rows) +
         (o.compact ? "" : " per edge");
}

std::vector<Tensor> Concat(std::vector<Tensor> first, const std::vector<Tensor>& rest) {
  first.insert(first.end(), rest.begin(), rest.end());
  return first;
}

template <typename T>
class RgcnFusedCudaTest : public ::testing::Test {
 protected:
  void SetUp() override { RequireCudaKernels(kOps); }
  // float sums in another order (atomics, cuBLAS blocking); double differs only by rounding.
  static double Tol() { return std::is_same_v<T, float> ? 1e-4 : 1e-10; }

  // Forward, backward (with dX and with dX skipped) of rgnn.rgcn on `g` with widths k -> d.
  static void CompareFeatures(const SegmentGraph& g, int64_t k, int64_t d, uint64_t seed, const std::string& what) {
    SCOPED_TRACE(what + ", K " + std::to_string(k) + ", D " + std::to_string(d));
    const SegmentTensors st = ToSegmentTensors<T>(g);
    const Tensor x = MakeTensor<T>({g.m, k}, RandomValues<T>(g.m * k, seed)),
                 w = MakeTensor<T>({g.r, k, d}, RandomValues<T>(g.r * k * d, seed + 1)),
                 dh = MakeTensor<T>({g.n, d}, RandomValues<T>(g.n * d, seed + 2));
    // Garbage in every output: the kernels overwrite all of it.
    CompareDevices("rgnn.rgcn.fwd", Concat({x, w, st.seg_norm}, st.dst), {Filled<T>({g.n, d}, T(3))}, Tol());
    CompareDevices("rgnn.rgcn.bwd", Concat({dh, x, w, st.seg_norm, st.seg_dst}, st.src),
                   {Filled<T>({g.m, k}, T(3)), Filled<T>({g.r, k, d}, T(3))}, Tol());
    CompareDevices("rgnn.rgcn.bwd", Concat({dh, x, w, st.seg_norm, st.seg_dst}, st.src),
                   {Filled<T>({0, k}, T(0)), Filled<T>({g.r, k, d}, T(3))}, Tol());
  }

  // Forward and backward of rgnn.rgcn_embed on `g` with a vocabulary of m + 5 rows and distinct, scattered row ids.
  static void CompareOneHot(const SegmentGraph& g, int64_t d, uint64_t seed, const std::string& what) {
    SCOPED_TRACE(what + ", D " + std::to_string(d));
    const SegmentTensors st = ToSegmentTensors<T>(g);
    const int64_t v = g.m + 5;
    int64_t step = 7;
    while (std::gcd(step, v) != 1) ++step;
    std::vector<int64_t> row_id(static_cast<size_t>(g.m));
    // Distinct, as gcd(step, v) = 1.
    for (int64_t i = 0; i < g.m; ++i) row_id[static_cast<size_t>(i)] = (i * step + 3) % v;
    const Tensor rows = MakeTensor<int64_t>({g.m}, row_id);
    const Tensor w = MakeTensor<T>({g.r, v, d}, RandomValues<T>(g.r * v * d, seed)),
                 dh = MakeTensor<T>({g.n, d}, RandomValues<T>(g.n * d, seed + 1));
    CompareDevices("rgnn.rgcn_embed.fwd", Concat({w, rows, st.seg_norm}, st.dst), {Filled<T>({g.n, d}, T(3))}, Tol());
    CompareDevices("rgnn.rgcn_embed.bwd", Concat({dh, rows, st.seg_norm, st.seg_dst}, st.src),
                   {Filled<T>({g.r, v, d}, T(3))}, Tol());
  }
};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RgcnFusedCudaTest, FloatTypes);

TYPED_TEST(RgcnFusedCudaTest, FeaturesOverLayouts) {
  uint64_t seed = 10;
  for (const SegmentOptions& options : kLayouts) {
    const SegmentGraph g = RandomSegmentGraph(300, 200, 9, 3000, 250, 77, options);
    this->CompareFeatures(g, 24, 16, seed += 3, Describe(options));
  }
}

TYPED_TEST(RgcnFusedCudaTest, FeaturesOverWidths) {
  const SegmentOptions options{5, 7, true};
  const SegmentGraph g = RandomSegmentGraph(120, 90, 6, 900, 100, 5, options);
  uint64_t seed = 20;
  for (const auto& [k, d] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 9}, {33, 7}, {7, 40}, {64, 64}}) {
    this->CompareFeatures(g, k, d, seed += 3, Describe(options));
  }
}

TYPED_TEST(RgcnFusedCudaTest, OneHotOverLayouts) {
  uint64_t seed = 30;
  for (const SegmentOptions& options : kLayouts) {
    const SegmentGraph g = RandomSegmentGraph(300, 200, 9, 3000, 250, 78, options);
    this->CompareOneHot(g, 16, seed += 2, Describe(options));
    this->CompareOneHot(g, 3, seed += 2, Describe(options));
  }
}

TYPED_TEST(RgcnFusedCudaTest, MoreItemsThanOneChunk) {
  // ~84000 segments and pairs (every edge its own), more than the 65536 rows of one chunk: the relation
  // slices straddle the chunk boundary, and dW accumulates over chunks.
  const SegmentOptions options{64, 64, false};
  const SegmentGraph g = RandomSegmentGraph(5000, 4000, 7, 70000, 4500, 91, options);
  ASSERT_GT(g.num_segs(), 65536);
  ASSERT_GT(g.num_pairs(), 65536);
  this->CompareFeatures(g, 3, 2, 40, Describe(options));
  this->CompareOneHot(g, 2, 50, Describe(options));
}

TYPED_TEST(RgcnFusedCudaTest, EdgelessGraph) {
  // No segment, no pair: H, dX and dW come out zero (over garbage).
  const SegmentGraph g = BuildSegmentGraph(6, 4, 3, {}, {2, 2, true});
  ASSERT_EQ(g.num_segs(), 0);
  this->CompareFeatures(g, 3, 2, 60, "no edges");
  this->CompareOneHot(g, 2, 70, "no edges");
}

}  // namespace
}  // namespace tessel::kernel_test

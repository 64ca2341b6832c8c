// Every rgnn CUDA kernel against its CPU counterpart on fresh random inputs, with a tolerance per dtype
// (float: reordered sums and atomics; double: rounding only). Skipped, with the reason, when Tessel was
// built without CUDA or no GPU is visible.
#include <gtest/gtest.h>

#include <numeric>

#include "rgnn_test_util.h"
#include "workers/plugin_host/op_table.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class CrossDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override { RequireCudaKernels(workers::OpsOfFamily("rgnn")); }
  // float sums of ~100 terms in a different order (and atomics); double differs only by rounding.
  static double Tol() { return std::is_same_v<T, float> ? 1e-4 : 1e-10; }

  const Graph graph_ = RandomGraph(
      {.num_src_rows = 300, .num_dst = 200, .num_relations = 9, .num_edges = 3000, .distinct_sources = 250}, 77);
  const int64_t k_ = 24, d_ = 16;
};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CrossDeviceTest, FloatTypes);

TYPED_TEST(CrossDeviceTest, TypedLinear) {
  using T = TypeParam;
  const Graph& g = this->graph_;
  const int64_t k = this->k_, d = this->d_;
  GraphTensors gt = ToTensors<T>(g);
  Tensor x = MakeTensor<T>({g.m, k}, RandomValues<T>(g.m * k, 1)),
         w = MakeTensor<T>({g.r, k, d}, RandomValues<T>(g.r * k * d, 2));
  Tensor dy = MakeTensor<T>({g.num_uniq(), d}, RandomValues<T>(g.num_uniq() * d, 3));
  CompareDevices("rgnn.typed_linear.fwd", {x, w, gt.uniq_ptr, gt.uniq_src}, {Filled<T>({g.num_uniq(), d}, T(3))},
                 this->Tol());
  CompareDevices("rgnn.typed_linear.bwd", {dy, x, w, gt.uniq_ptr, gt.uniq_src},
                 {Filled<T>({g.m, k}, T(3)), Filled<T>({g.r, k, d}, T(3))}, this->Tol());
  CompareDevices("rgnn.typed_linear.bwd", {dy, x, w, gt.uniq_ptr, gt.uniq_src},
                 {Filled<T>({0, k}, T(0)), Filled<T>({g.r, k, d}, T(3))}, this->Tol());
}

TYPED_TEST(CrossDeviceTest, TypedEmbed) {
  using T = TypeParam;
  const Graph& g = this->graph_;
  const int64_t v = g.m + 5, d = this->d_;
  std::vector<int64_t> row_id(static_cast<size_t>(g.m));
  std::iota(row_id.begin(), row_id.end(), 5);
  GraphTensors gt = ToTensors<T>(g);
  Tensor rows = MakeTensor<int64_t>({g.m}, row_id);
  CompareDevices("rgnn.typed_embed.fwd",
                 {MakeTensor<T>({g.r, v, d}, RandomValues<T>(g.r * v * d, 1)), gt.uniq_ptr, gt.uniq_src, rows},
                 {Filled<T>({g.num_uniq(), d}, T(3))}, this->Tol());
  CompareDevices(
      "rgnn.typed_embed.bwd",
      {MakeTensor<T>({g.num_uniq(), d}, RandomValues<T>(g.num_uniq() * d, 2)), gt.uniq_ptr, gt.uniq_src, rows},
      {Filled<T>({g.r, v, d}, T(3))}, this->Tol());
}

TYPED_TEST(CrossDeviceTest, Aggregate) {
  using T = TypeParam;
  const Graph& g = this->graph_;
  const int64_t d = this->d_;
  GraphTensors gt = ToTensors<T>(g);
  CompareDevices("rgnn.aggregate.fwd",
                 {MakeTensor<T>({g.num_uniq(), d}, RandomValues<T>(g.num_uniq() * d, 1)), gt.edge_uniq, gt.norm,
                  gt.dst_ptr, gt.dst_edges},
                 {Filled<T>({g.n, d}, T(3))}, this->Tol());
  CompareDevices("rgnn.aggregate.bwd",
                 {MakeTensor<T>({g.n, d}, RandomValues<T>(g.n * d, 2)), gt.dst, gt.norm, gt.uniq_edge_ptr},
                 {Filled<T>({g.num_uniq(), d}, T(3))}, this->Tol());
}

}  // namespace
}  // namespace tessel::kernel_test

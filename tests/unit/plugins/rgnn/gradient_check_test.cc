// Every backward kernel against central finite differences of its forward kernel, in double, through
// a scalar objective L = sum(G * output) with random G (so dOutput = G).
#include <gtest/gtest.h>

#include "rgnn_test_util.h"

namespace tessel::kernel_test {
namespace {

class GradientCheck : public ::testing::Test {
 protected:
  GradientCheck()
      : graph_(RandomGraph(
            {.num_src_rows = 7, .num_dst = 6, .num_relations = 4, .num_edges = 18, .distinct_sources = 5}, 3)),
        gt_(ToTensors<double>(graph_)) {}
  Graph graph_;
  GraphTensors gt_;
};

TEST_F(GradientCheck, TypedLinearInputAndWeight) {
  const Graph& g = graph_;
  const int64_t k = 3, d = 2;
  auto x = RandomValues<double>(g.m * k, 1), w = RandomValues<double>(g.r * k * d, 2);
  const auto gy = RandomValues<double>(g.num_uniq() * d, 3);
  auto objective = [&] {
    Tensor tx = MakeTensor<double>({g.m, k}, x), tw = MakeTensor<double>({g.r, k, d}, w);
    Tensor ty = Filled<double>({g.num_uniq(), d}, 0.0);
    CallCpu("rgnn.typed_linear.fwd", {&tx, &tw, &gt_.uniq_ptr, &gt_.uniq_src}, {&ty}, nullptr);
    return Dot(ty, gy);
  };
  Tensor tdy = MakeTensor<double>({g.num_uniq(), d}, gy), tx = MakeTensor<double>({g.m, k}, x);
  Tensor tw = MakeTensor<double>({g.r, k, d}, w);
  Tensor tdx = Filled<double>({g.m, k}, 0.0), tdw = Filled<double>({g.r, k, d}, 0.0);
  CallCpu("rgnn.typed_linear.bwd", {&tdy, &tx, &tw, &gt_.uniq_ptr, &gt_.uniq_src}, {&tdx, &tdw}, nullptr);
  ExpectNear(ToVector<double>(tdx), NumericGrad(x, objective), kGradTol, "dX");
  ExpectNear(ToVector<double>(tdw), NumericGrad(w, objective), kGradTol, "dW");
}

TEST_F(GradientCheck, TypedEmbedWeight) {
  const Graph& g = graph_;
  const int64_t v = g.m, d = 3;
  std::vector<int64_t> row_id(static_cast<size_t>(g.m));
  for (int64_t i = 0; i < g.m; ++i) row_id[i] = (i * 3 + 1) % v;  // a permutation (gcd(3, 7) = 1)
  Tensor trow = MakeTensor<int64_t>({g.m}, row_id);
  auto w = RandomValues<double>(g.r * v * d, 1);
  const auto gy = RandomValues<double>(g.num_uniq() * d, 2);
  auto objective = [&] {
    Tensor tw = MakeTensor<double>({g.r, v, d}, w), ty = Filled<double>({g.num_uniq(), d}, 0.0);
    CallCpu("rgnn.typed_embed.fwd", {&tw, &gt_.uniq_ptr, &gt_.uniq_src, &trow}, {&ty}, nullptr);
    return Dot(ty, gy);
  };
  Tensor tdy = MakeTensor<double>({g.num_uniq(), d}, gy), tdw = Filled<double>({g.r, v, d}, 0.0);
  CallCpu("rgnn.typed_embed.bwd", {&tdy, &gt_.uniq_ptr, &gt_.uniq_src, &trow}, {&tdw}, nullptr);
  ExpectNear(ToVector<double>(tdw), NumericGrad(w, objective), kGradTol, "dW");
}

TEST_F(GradientCheck, Aggregate) {
  const Graph& g = graph_;
  const int64_t d = 3;
  auto y = RandomValues<double>(g.num_uniq() * d, 1);
  const auto gh = RandomValues<double>(g.n * d, 2);
  auto objective = [&] {
    Tensor ty = MakeTensor<double>({g.num_uniq(), d}, y), th = Filled<double>({g.n, d}, 0.0);
    CallCpu("rgnn.aggregate.fwd", {&ty, &gt_.edge_uniq, &gt_.norm, &gt_.dst_ptr, &gt_.dst_edges}, {&th}, nullptr);
    return Dot(th, gh);
  };
  Tensor tdh = MakeTensor<double>({g.n, d}, gh), tdy = Filled<double>({g.num_uniq(), d}, 0.0);
  CallCpu("rgnn.aggregate.bwd", {&tdh, &gt_.dst, &gt_.norm, &gt_.uniq_edge_ptr}, {&tdy}, nullptr);
  ExpectNear(ToVector<double>(tdy), NumericGrad(y, objective), kGradTol, "dY");
}

// A whole layer, L = sum(G * relu(aggregate(typed_linear(X, W)))), differentiated by chaining the
// backward kernels the way the trainer does.
TEST_F(GradientCheck, RgcnLayerChain) {
  const Graph& g = graph_;
  const int64_t k = 3, d = 2;
  auto x = RandomValues<double>(g.m * k, 1), w = RandomValues<double>(g.r * k * d, 2);
  const auto gout = RandomValues<double>(g.n * d, 3);
  struct Forward {
    Tensor y, h, out;
  };
  auto forward = [&] {
    Tensor tx = MakeTensor<double>({g.m, k}, x), tw = MakeTensor<double>({g.r, k, d}, w);
    Forward f{Filled<double>({g.num_uniq(), d}, 0.0), Filled<double>({g.n, d}, 0.0), Filled<double>({g.n, d}, 0.0)};
    CallCpu("rgnn.typed_linear.fwd", {&tx, &tw, &gt_.uniq_ptr, &gt_.uniq_src}, {&f.y}, nullptr);
    CallCpu("rgnn.aggregate.fwd", {&f.y, &gt_.edge_uniq, &gt_.norm, &gt_.dst_ptr, &gt_.dst_edges}, {&f.h}, nullptr);
    CallCpu("nn.relu.fwd", {&f.h}, {&f.out}, nullptr);
    return f;
  };
  auto objective = [&] { return Dot(forward().out, gout); };
  Forward f = forward();
  Tensor tgout = MakeTensor<double>({g.n, d}, gout), dh = Filled<double>({g.n, d}, 0.0);
  CallCpu("nn.relu.bwd", {&tgout, &f.out}, {&dh}, nullptr);
  Tensor dy = Filled<double>({g.num_uniq(), d}, 0.0);
  CallCpu("rgnn.aggregate.bwd", {&dh, &gt_.dst, &gt_.norm, &gt_.uniq_edge_ptr}, {&dy}, nullptr);
  Tensor tx = MakeTensor<double>({g.m, k}, x), tw = MakeTensor<double>({g.r, k, d}, w);
  Tensor dx = Filled<double>({g.m, k}, 0.0), dw = Filled<double>({g.r, k, d}, 0.0);
  CallCpu("rgnn.typed_linear.bwd", {&dy, &tx, &tw, &gt_.uniq_ptr, &gt_.uniq_src}, {&dx, &dw}, nullptr);
  ExpectNear(ToVector<double>(dx), NumericGrad(x, objective), kGradTol, "dX");
  ExpectNear(ToVector<double>(dw), NumericGrad(w, objective), kGradTol, "dW");
}

}  // namespace
}  // namespace tessel::kernel_test

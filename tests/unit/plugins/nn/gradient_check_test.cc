// Every backward of libtessel_nn.so against central finite differences of its forward, in double,
// through a scalar objective L = sum(G * output) with random G (so dOutput = G).
#include <gtest/gtest.h>
#include <tessel/ops/nn.h>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

TEST(NnGradientCheck, Relu) {
  const int64_t n = 5, d = 4;
  auto x = RandomValues<double>(n * d, 1);
  for (double& v : x) v += v >= 0 ? 0.1 : -0.1;  // away from the kink
  const auto gy = RandomValues<double>(n * d, 2);
  auto objective = [&] {
    Tensor tx = MakeTensor<double>({n, d}, x), ty = Filled<double>({n, d}, 0.0);
    CallCpu("nn.relu.fwd", {&tx}, {&ty}, nullptr);
    return Dot(ty, gy);
  };
  Tensor tx = MakeTensor<double>({n, d}, x), ty = Filled<double>({n, d}, 0.0);
  CallCpu("nn.relu.fwd", {&tx}, {&ty}, nullptr);
  Tensor tdy = MakeTensor<double>({n, d}, gy), tdx = Filled<double>({n, d}, 0.0);
  CallCpu("nn.relu.bwd", {&tdy, &ty}, {&tdx}, nullptr);
  ExpectNear(ToVector<double>(tdx), NumericGrad(x, objective), kGradTol, "dX");
}

TEST(NnGradientCheck, SoftmaxXentThroughScaledLoss) {
  const int64_t n = 6, c = 3;
  auto logits = RandomValues<double>(n * c, 1, -2, 2);
  Tensor labels = MakeTensor<int64_t>({n}, {0, 2, 1, -1, 2, 0});
  Tensor mask = MakeTensor<uint8_t>({n}, {1, 1, 0, 1, 1, 1});
  const double scale = 0.25;
  const tessel_softmax_xent_params params{sizeof(tessel_softmax_xent_params), scale};
  Tensor dlogits = Filled<double>({n, c}, 0.0);
  auto run = [&](Tensor* dl) {
    Tensor tl = MakeTensor<double>({n, c}, logits), loss = Filled<double>({1}, 0.0), correct = Filled<int64_t>({1}, 0);
    Tensor scratch = Filled<double>({n, c}, 0.0);
    CallCpuWith("nn.softmax_xent.fwd_bwd", {&tl, &labels, &mask}, {&loss, &correct, dl ? dl : &scratch}, params,
                nullptr);
    return scale * loss.data<double>()[0];
  };
  run(&dlogits);
  ExpectNear(ToVector<double>(dlogits), NumericGrad(logits, [&] { return run(nullptr); }), kGradTol, "dlogits");
}

TEST(NnGradientCheck, Gelu) {
  const int64_t n = 5, d = 4;
  auto x = RandomValues<double>(n * d, 1, -3, 3);
  const auto gy = RandomValues<double>(n * d, 2);
  auto objective = [&] {
    Tensor tx = MakeTensor<double>({n, d}, x), ty = Filled<double>({n, d}, 0.0);
    CallCpu("nn.gelu.fwd", {&tx}, {&ty}, nullptr);
    return Dot(ty, gy);
  };
  Tensor tx = MakeTensor<double>({n, d}, x), tdy = MakeTensor<double>({n, d}, gy), tdx = Filled<double>({n, d}, 0.0);
  CallCpu("nn.gelu.bwd", {&tdy, &tx}, {&tdx}, nullptr);
  ExpectNear(ToVector<double>(tdx), NumericGrad(x, objective), kGradTol, "dX");
}

TEST(NnGradientCheck, GeluTanh) {
  const int64_t n = 5, d = 4;
  auto x = RandomValues<double>(n * d, 1, -3, 3);
  const auto gy = RandomValues<double>(n * d, 2);
  auto objective = [&] {
    Tensor tx = MakeTensor<double>({n, d}, x), ty = Filled<double>({n, d}, 0.0);
    CallCpu("nn.gelu_tanh.fwd", {&tx}, {&ty}, nullptr);
    return Dot(ty, gy);
  };
  Tensor tx = MakeTensor<double>({n, d}, x), tdy = MakeTensor<double>({n, d}, gy), tdx = Filled<double>({n, d}, 0.0);
  CallCpu("nn.gelu_tanh.bwd", {&tdy, &tx}, {&tdx}, nullptr);
  ExpectNear(ToVector<double>(tdx), NumericGrad(x, objective), kGradTol, "dX");
}

// Y = X W^T + b: dX, dW and db of L = sum(G * Y) from one backward call into zeroed dW and db.
TEST(NnGradientCheck, Linear) {
  const int64_t n = 6, k = 4, o = 3;
  auto x = RandomValues<double>(n * k, 1), w = RandomValues<double>(o * k, 2), b = RandomValues<double>(o, 3);
  const auto gy = RandomValues<double>(n * o, 4);
  auto objective = [&] {
    Tensor tx = MakeTensor<double>({n, k}, x), tw = MakeTensor<double>({o, k}, w), tb = MakeTensor<double>({o}, b);
    Tensor ty = Filled<double>({n, o}, 0.0);
    CallCpu("nn.linear.fwd", {&tx, &tw, &tb}, {&ty}, nullptr);
    return Dot(ty, gy);
  };
  Tensor tdy = MakeTensor<double>({n, o}, gy), tx = MakeTensor<double>({n, k}, x), tw = MakeTensor<double>({o, k}, w);
  Tensor tdx = Filled<double>({n, k}, 9.0), tdw = Filled<double>({o, k}, 0.0), tdb = Filled<double>({o}, 0.0);
  CallCpu("nn.linear.bwd", {&tdy, &tx, &tw}, {&tdx, &tdw, &tdb}, nullptr);
  ExpectNear(ToVector<double>(tdx), NumericGrad(x, objective), kGradTol, "dX");
  ExpectNear(ToVector<double>(tdw), NumericGrad(w, objective), kGradTol, "dW");
  ExpectNear(ToVector<double>(tdb), NumericGrad(b, objective), kGradTol, "db");
}

// C = alpha op(A) op(B) + beta C0 for every transpose combination: dA and dB are themselves GEMMs, so the
// check differentiates the forward numerically and compares with the closed forms computed by loops.
TEST(NnGradientCheck, GemmAllTransposes) {
  const int64_t m = 4, k = 3, n = 5;
  const double alpha = 0.7, beta = 0.3;
  for (int ta = 0; ta <= 1; ++ta) {
    for (int tb = 0; tb <= 1; ++tb) {
      SCOPED_TRACE("trans_a " + std::to_string(ta) + " trans_b " + std::to_string(tb));
      const std::vector<int64_t> a_shape = ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
      const std::vector<int64_t> b_shape = tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
      auto a = RandomValues<double>(m * k, 1), b = RandomValues<double>(k * n, 2);
      const auto c0 = RandomValues<double>(m * n, 3), gc = RandomValues<double>(m * n, 4);
      const tessel_gemm_params params{sizeof(tessel_gemm_params), ta, tb, alpha, beta};
      auto objective = [&] {
        Tensor ta_ = MakeTensor<double>(a_shape, a), tb_ = MakeTensor<double>(b_shape, b);
        Tensor tc = MakeTensor<double>({m, n}, c0);
        CallCpuWith("nn.gemm", {&ta_, &tb_}, {&tc}, params, nullptr);
        return Dot(tc, gc);
      };
      // The forward against loops.
      Tensor ta_ = MakeTensor<double>(a_shape, a), tb_ = MakeTensor<double>(b_shape, b),
             tc = MakeTensor<double>({m, n}, c0);
      CallCpuWith("nn.gemm", {&ta_, &tb_}, {&tc}, params, nullptr);
      const auto at = [&](int64_t i, int64_t p) { return ta ? a[p * m + i] : a[i * k + p]; };
      const auto bt = [&](int64_t p, int64_t j) { return tb ? b[j * k + p] : b[p * n + j]; };
      std::vector<double> expect(m * n);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p) sum += at(i, p) * bt(p, j);
          expect[i * n + j] = alpha * sum + beta * c0[i * n + j];
        }
      }
      ExpectNear(ToVector<double>(tc), expect, 1e-12, "C");
      // dL/dA, dL/dB numerically against the closed forms alpha G op(B)^T and alpha op(A)^T G.
      std::vector<double> da(m * k, 0.0), db(k * n, 0.0);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t p = 0; p < k; ++p) {
          double sum = 0;
          for (int64_t j = 0; j < n; ++j) sum += gc[i * n + j] * bt(p, j);
          da[ta ? p * m + i : i * k + p] = alpha * sum;
        }
      }
      for (int64_t p = 0; p < k; ++p) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t i = 0; i < m; ++i) sum += at(i, p) * gc[i * n + j];
          db[tb ? j * k + p : p * n + j] = alpha * sum;
        }
      }
      ExpectNear(NumericGrad(a, objective), da, kGradTol, "dA");
      ExpectNear(NumericGrad(b, objective), db, kGradTol, "dB");
    }
  }
}

}  // namespace
}  // namespace tessel::kernel_test

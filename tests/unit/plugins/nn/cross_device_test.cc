// Every CUDA kernel of libtessel_nn.so against its CPU counterpart on fresh random inputs, with a
// tolerance per dtype (float: reordered sums; double: rounding only). Skipped, with the reason, when
// Tessel was built without CUDA or no GPU is visible.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>

#include <algorithm>
#include <functional>
#include <string>

#include "../kernel_test_util.h"
#include "workers/plugin_host/op_table.h"

namespace tessel::kernel_test {
namespace {

// The failures `f` reports, caught (gtest-spi's reporter) instead of failing the test that runs it.
std::string FailuresOf(const std::function<void()>& f) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    f();
  }
  std::string all;
  for (int i = 0; i < results.size(); ++i) all += std::string(results.GetTestPartResult(i).message()) + "\n";
  return all;
}

// The comparison itself, on any machine: a "CUDA kernel" whose dlogits are zeros, or only half written, or
// 1e-3 off in one row, must fail it. Softmax cross-entropy's dlogits are about 1/n each (here 3e-4): the
// old tolerance, relative with a floor of 1, let a kernel that wrote zeros there pass.
TEST(CrossDeviceComparison, AKernelThatWritesZerosOrHalfItsOutputsFails) {
  const int64_t n = 3000, c = 5;
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::vector<uint8_t> mask(static_cast<size_t>(n), 1);
  for (int64_t i = 0; i < n; ++i) labels[i] = i % c;
  const tessel_softmax_xent_params xent{sizeof(tessel_softmax_xent_params), 1.0 / static_cast<double>(n)};
  const std::vector<Tensor> inputs = {MakeTensor<float>({n, c}, RandomValues<float>(n * c, 1, -4, 4)),
                                      MakeTensor<int64_t>({n}, labels), MakeTensor<uint8_t>({n}, mask)};
  const std::vector<Tensor> outputs = {Filled<double>({1}, 0.0), Filled<int64_t>({1}, 0), Filled<float>({n, c}, 0.0f)};
  ThreadPool pool(2);
  // The CPU kernel itself as the kernel under test, then dlogits changed as `mangle` says.
  const auto run = [&](const std::function<void(float*)>& mangle) {
    return FailuresOf([&] {
      CompareWithCpu("nn.softmax_xent.fwd_bwd", inputs, outputs, 1e-4, &xent, sizeof(xent),
                     [&](std::vector<Tensor>& in, std::vector<Tensor>& out) {
                       CallCpu("nn.softmax_xent.fwd_bwd", {&in[0], &in[1], &in[2]}, {&out[0], &out[1], &out[2]}, &pool,
                               &xent, sizeof(xent));
                       mangle(out[2].data<float>());
                     });
    });
  };
  EXPECT_EQ(run([](float*) {}), "") << "the CPU kernel against itself";
  const std::string zeros = run([&](float* d) { std::fill(d, d + n * c, 0.0f); });
  EXPECT_NE(zeros.find("output 2: 15000 of 15000 values differ"), std::string::npos) << zeros;
  const std::string half = run([&](float* d) { std::fill(d + n * c / 2, d + n * c, 0.0f); });
  EXPECT_NE(half.find("output 2: 7500 of 15000 values differ"), std::string::npos) << half;
  const std::string off = run([&](float* d) {
    for (int64_t k = 0; k < c; ++k) d[7 * c + k] *= 1.001f;
  });
  EXPECT_NE(off.find("output 2[35]"), std::string::npos) << off;
  for (const std::string* r : {&zeros, &half, &off}) EXPECT_EQ(r->find("output 0"), std::string::npos) << *r;
}

template <typename T>
class NnCrossDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> ops = workers::OpsOfFamily("nn");
    for (const std::string& op : workers::OpsOfFamily("optim")) ops.push_back(op);
    RequireCudaKernels(ops);
  }
  static double Tol() { return std::is_same_v<T, float> ? 1e-4 : 1e-10; }
};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(NnCrossDeviceTest, FloatTypes);

TYPED_TEST(NnCrossDeviceTest, Relu) {
  using T = TypeParam;
  const int64_t n = 500, d = 33;
  Tensor x = MakeTensor<T>({n, d}, RandomValues<T>(n * d, 1));
  CompareDevices("nn.relu.fwd", {x}, {Filled<T>({n, d}, T(3))}, this->Tol());
  CompareDevices("nn.relu.bwd", {MakeTensor<T>({n, d}, RandomValues<T>(n * d, 2)), x}, {Filled<T>({n, d}, T(3))},
                 this->Tol());
}

TYPED_TEST(NnCrossDeviceTest, SoftmaxXent) {
  using T = TypeParam;
  const int64_t n = 3000, c = 5;
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = (i * 7) % (c + 1) - 1;
    mask[i] = i % 3 != 0;
  }
  const tessel_softmax_xent_params xent{sizeof(tessel_softmax_xent_params), 0.01};
  CompareDevices("nn.softmax_xent.fwd_bwd",
                 {MakeTensor<T>({n, c}, RandomValues<T>(n * c, 1, -4, 4)), MakeTensor<int64_t>({n}, labels),
                  MakeTensor<uint8_t>({n}, mask)},
                 {Filled<double>({1}, -1.0), Filled<int64_t>({1}, -1), Filled<T>({n, c}, T(3))}, this->Tol(), &xent,
                 sizeof(xent));
}

TYPED_TEST(NnCrossDeviceTest, Adam) {
  using T = TypeParam;
  const int64_t p = 10000;
  const tessel_adam_params adam{sizeof(tessel_adam_params), 0.01, 0.9, 0.999, 1e-8, 1e-4, 3};
  CompareDevicesWith(
      "optim.adam.step",
      {MakeTensor<T>({p}, RandomValues<T>(p, 1)), MakeTensor<T>({p}, RandomValues<T>(p, 2)),
       MakeTensor<T>({p}, RandomValues<T>(p, 3, -0.1, 0.1)), MakeTensor<T>({p}, RandomValues<T>(p, 4, 0, 0.1))},
      {}, this->Tol(), adam);
}

TYPED_TEST(NnCrossDeviceTest, Gelu) {
  using T = TypeParam;
  const int64_t n = 500, d = 33;
  Tensor x = MakeTensor<T>({n, d}, RandomValues<T>(n * d, 1, -5, 5));
  CompareDevices("nn.gelu.fwd", {x}, {Filled<T>({n, d}, T(3))}, this->Tol());
  CompareDevices("nn.gelu.bwd", {MakeTensor<T>({n, d}, RandomValues<T>(n * d, 2)), x}, {Filled<T>({n, d}, T(3))},
                 this->Tol());
}

TYPED_TEST(NnCrossDeviceTest, GemmEveryTranspose) {
  using T = TypeParam;
  const int64_t m = 70, k = 300, n = 40;
  for (int ta = 0; ta <= 1; ++ta) {
    for (int tb = 0; tb <= 1; ++tb) {
      const tessel_gemm_params params{sizeof(tessel_gemm_params), ta, tb, 0.5, 0.25};
      CompareDevicesWith(
          "nn.gemm",
          {MakeTensor<T>(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, RandomValues<T>(m * k, 1)),
           MakeTensor<T>(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, RandomValues<T>(k * n, 2))},
          {MakeTensor<T>({m, n}, RandomValues<T>(m * n, 3))}, this->Tol() * 10, params);
    }
  }
}

TYPED_TEST(NnCrossDeviceTest, Linear) {
  using T = TypeParam;
  const int64_t n = 300, k = 70, o = 90;
  Tensor x = MakeTensor<T>({n, k}, RandomValues<T>(n * k, 1)), w = MakeTensor<T>({o, k}, RandomValues<T>(o * k, 2));
  Tensor dy = MakeTensor<T>({n, o}, RandomValues<T>(n * o, 3));
  CompareDevices("nn.linear.fwd", {x, w, MakeTensor<T>({o}, RandomValues<T>(o, 4))}, {Filled<T>({n, o}, T(3))},
                 this->Tol() * 10);
  // cuBLASLt's GELU epilogue must be GPT-2's tanh GELU, not the erf one: they differ by up to 4.7e-4 (at
  // |x| = 2.7), and a short K keeps the sums' order out of it, so Pre over about [-4, 4] is held to 1e-5.
  if constexpr (std::is_same_v<T, float>) {
    const int64_t kk = 16, oo = 96;
    CompareDevices(
        "nn.linear_gelu_tanh.fwd",
        {MakeTensor<T>({n, kk}, RandomValues<T>(n * kk, 9)), MakeTensor<T>({oo, kk}, RandomValues<T>(oo * kk, 10)),
         MakeTensor<T>({oo}, RandomValues<T>(oo, 11))},
        {Filled<T>({n, oo}, T(3)), Filled<T>({n, oo}, T(3))}, 1e-5);
  }
  // The fused GELU: O = 96 takes cuBLASLt's epilogue (f32), O = 90 (not a multiple of 8) the pair of kernels.
  for (const int64_t width : {int64_t{96}, o}) {
    SCOPED_TRACE("O " + std::to_string(width));
    Tensor wg = MakeTensor<T>({width, k}, RandomValues<T>(width * k, 7));
    CompareDevices("nn.linear_gelu_tanh.fwd", {x, wg, MakeTensor<T>({width}, RandomValues<T>(width, 8))},
                   {Filled<T>({n, width}, T(3)), Filled<T>({n, width}, T(3))}, this->Tol() * 10);
  }
  // dW and db start from values (the kernel adds to them); dX once computed, once skipped.
  for (const int64_t dx_rows : {n, int64_t{0}}) {
    SCOPED_TRACE("dX rows " + std::to_string(dx_rows));
    CompareDevices("nn.linear.bwd", {dy, x, w},
                   {Filled<T>({dx_rows, k}, T(3)), MakeTensor<T>({o, k}, RandomValues<T>(o * k, 5)),
                    MakeTensor<T>({o}, RandomValues<T>(o, 6))},
                   this->Tol() * 10);
  }
}

TYPED_TEST(NnCrossDeviceTest, GeluTanh) {
  using T = TypeParam;
  const int64_t n = 500, d = 33;
  Tensor x = MakeTensor<T>({n, d}, RandomValues<T>(n * d, 1, -8, 8));
  CompareDevices("nn.gelu_tanh.fwd", {x}, {Filled<T>({n, d}, T(3))}, this->Tol());
  CompareDevices("nn.gelu_tanh.bwd", {MakeTensor<T>({n, d}, RandomValues<T>(n * d, 2)), x}, {Filled<T>({n, d}, T(3))},
                 this->Tol());
}

TYPED_TEST(NnCrossDeviceTest, AddAndSumSquares) {
  using T = TypeParam;
  const int64_t n = 200003;
  Tensor a = MakeTensor<T>({n}, RandomValues<T>(n, 1));
  CompareDevices("nn.add", {a, MakeTensor<T>({n}, RandomValues<T>(n, 2))}, {Filled<T>({n}, T(3))}, this->Tol());
  // Both accumulate in double, in different orders.
  CompareDevices("nn.sum_squares", {a}, {Filled<double>({1}, -1.0)}, 1e-12);
}

TYPED_TEST(NnCrossDeviceTest, Adamw) {
  using T = TypeParam;
  const int64_t p = 10000;
  const tessel_adamw_params adamw{sizeof(tessel_adamw_params), 0.01, 0.9, 0.95, 1e-8, 0.1, 0.5, 3};
  CompareDevicesWith(
      "optim.adamw.step",
      {MakeTensor<T>({p}, RandomValues<T>(p, 1)), MakeTensor<T>({p}, RandomValues<T>(p, 2)),
       MakeTensor<T>({p}, RandomValues<T>(p, 3, -0.1, 0.1)), MakeTensor<T>({p}, RandomValues<T>(p, 4, 0, 0.1))},
      {}, this->Tol(), adamw);
}

// bf16: the CUDA kernels (tensor-core GEMMs with f32 sums, the others widened to f32) against the CPU's
// bf16 reference kernels. A bf16 result may differ by a rounding where the f32 sums ran in another order
// (2^-8 relative is one step); the f32 outputs (dW, db) only by the order of their sums.
constexpr double kBf16Tol = 2e-2, kBf16F32Tol = 1e-3;

TEST(NnCrossDeviceBf16, LinearAddGeluTanhSoftmaxXent) {
  RequireCudaKernels({"nn.linear.fwd", "nn.linear.bwd", "nn.linear_gelu_tanh.fwd", "nn.add", "nn.gelu_tanh.fwd",
                      "nn.gelu_tanh.bwd", "nn.softmax_xent.fwd_bwd"});
  if (IsSkipped()) return;
  const int64_t n = 300, k = 96, o = 130;
  Tensor x = Bf16Tensor({n, k}, Bf16Representable(n * k, 1)), w = Bf16Tensor({o, k}, Bf16Representable(o * k, 2));
  Tensor b = Bf16Tensor({o}, Bf16Representable(o, 3));
  CompareDevices("nn.linear.fwd", {x, w, b}, {Bf16Tensor({n, o}, std::vector<float>(n * o, 3.f))}, kBf16Tol);
  const int64_t og = 128;  // a multiple of 8: cuBLASLt's bias + GELU epilogue
  Tensor wg = Bf16Tensor({og, k}, Bf16Representable(og * k, 12)), bg = Bf16Tensor({og}, Bf16Representable(og, 13));
  CompareDevices(
      "nn.linear_gelu_tanh.fwd", {x, wg, bg},
      {Bf16Tensor({n, og}, std::vector<float>(n * og, 3.f)), Bf16Tensor({n, og}, std::vector<float>(n * og, 3.f))},
      kBf16Tol);
  Tensor dy = Bf16Tensor({n, o}, Bf16Representable(n * o, 4));
  CompareDevices(
      "nn.linear.bwd", {dy, x, w},
      {Bf16Tensor({n, k}, std::vector<float>(n * k, 3.f)), MakeTensor<float>({o, k}, RandomValues<float>(o * k, 5)),
       MakeTensor<float>({o}, RandomValues<float>(o, 6))},
      kBf16F32Tol);
  const int64_t m = 20011;
  Tensor a = Bf16Tensor({m}, Bf16Representable(m, 7, -4, 4));
  CompareDevices("nn.add", {a, Bf16Tensor({m}, Bf16Representable(m, 8, -4, 4))},
                 {Bf16Tensor({m}, std::vector<float>(m, 3.f))}, kBf16Tol);
  Tensor g = Bf16Tensor({n, k}, Bf16Representable(n * k, 9, -6, 6));
  CompareDevices("nn.gelu_tanh.fwd", {g}, {Bf16Tensor({n, k}, std::vector<float>(n * k, 3.f))}, kBf16Tol);
  CompareDevices("nn.gelu_tanh.bwd", {Bf16Tensor({n, k}, Bf16Representable(n * k, 10)), g},
                 {Bf16Tensor({n, k}, std::vector<float>(n * k, 3.f))}, kBf16Tol);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    labels[static_cast<size_t>(i)] = (i * 7) % (o + 1) - 1;
    mask[static_cast<size_t>(i)] = i % 5 != 0;
  }
  const tessel_softmax_xent_params xent{sizeof(tessel_softmax_xent_params), 0.01};
  CompareDevices(
      "nn.softmax_xent.fwd_bwd",
      {Bf16Tensor({n, o}, Bf16Representable(n * o, 11, -4, 4)), MakeTensor<int64_t>({n}, labels),
       MakeTensor<uint8_t>({n}, mask)},
      {Filled<double>({1}, -1.0), Filled<int64_t>({1}, -1), Bf16Tensor({n, o}, std::vector<float>(n * o, 3.f))},
      kBf16Tol, &xent, sizeof(xent));
}

}  // namespace
}  // namespace tessel::kernel_test

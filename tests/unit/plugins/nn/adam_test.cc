// optim.adam.step against torch.optim.Adam's update, worked by hand for two steps; optim.adam.step_rows
// against optim.adam.step; optim.adamw.step against torch.optim.AdamW's update computed here in double.
#include <gtest/gtest.h>
#include <tessel/ops/optim.h>

#include <cmath>
#include <limits>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

// hyper = {lr, beta1, beta2, eps, weight_decay, step}
tessel_adam_params Params(const std::vector<double>& hyper) {
  return tessel_adam_params{sizeof(tessel_adam_params),    hyper[0], hyper[1], hyper[2], hyper[3], hyper[4],
                            static_cast<int64_t>(hyper[5])};
}

void AdamStep(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const std::vector<double>& hyper,
              ThreadPool* pool) {
  CallCpuWith("optim.adam.step", {&param, &grad, &m, &v}, {}, Params(hyper), pool);
}

// lr 0.1, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01, param 1.0, grads 0.5 then -0.25:
// step 1: g = 0.5 + 0.01 * 1 = 0.51; m = 0.1 * 0.51 = 0.051; v = 0.001 * 0.51^2 = 2.601e-4;
//         the bias corrections undo the (1 - beta) factors, so param = 1 - 0.1 * 0.051 / 0.1 / (0.51 + 1e-8)
//         = 0.9000000019607843
// step 2: g = -0.25 + 0.01 * 0.9000000019607843 = -0.24099999998039215; m = 0.9 * 0.051 + 0.1 g = 0.0218...;
//         v = 0.999 * 2.601e-4 + 0.001 g^2 = 3.179208999905e-4;
//         param -= 0.1 / 0.19 * m / (sqrt(v) / sqrt(0.001999) + 1e-8) -> 0.8712293476231743
TEST(Adam, TwoStepsMatchTorchFormulaByHand) {
  Tensor param = MakeTensor<double>({1}, {1.0}), m = Filled<double>({1}, 0.0), v = Filled<double>({1}, 0.0);
  AdamStep(param, MakeTensor<double>({1}, {0.5}), m, v, {0.1, 0.9, 0.999, 1e-8, 0.01, 1, 0}, nullptr);
  EXPECT_NEAR(param.data<double>()[0], 0.9000000019607843, 1e-15);
  EXPECT_NEAR(m.data<double>()[0], 0.051, 1e-15);
  EXPECT_NEAR(v.data<double>()[0], 2.601e-4, 1e-18);
  AdamStep(param, MakeTensor<double>({1}, {-0.25}), m, v, {0.1, 0.9, 0.999, 1e-8, 0.01, 2, 0}, nullptr);
  EXPECT_NEAR(m.data<double>()[0], 0.02180000000196078, 1e-15);
  EXPECT_NEAR(v.data<double>()[0], 3.179208999905493e-4, 1e-18);
  EXPECT_NEAR(param.data<double>()[0], 0.8712293476231743, 1e-14);
}

TEST(Adam, FloatTracksDoubleOverManyElements) {
  ThreadPool pool(3);
  const int64_t p = 100000;
  ASSERT_GT(PoolChunks(p, 1 << 14, 3), 1);  // the kernel's grain: several chunks run
  const auto p0 = RandomValues<double>(p, 1), g1 = RandomValues<double>(p, 2), g2 = RandomValues<double>(p, 3);
  Tensor pd = MakeTensor<double>({p}, p0), md = Filled<double>({p}, 0.0), vd = Filled<double>({p}, 0.0);
  Tensor pf = MakeTensor<float>({p}, Cast<float>(p0)), mf = Filled<float>({p}, 0.f), vf = Filled<float>({p}, 0.f);
  for (int step = 1; step <= 2; ++step) {
    const auto& g = step == 1 ? g1 : g2;
    const std::vector<double> hyper = {0.01, 0.9, 0.999, 1e-8, 0.0, static_cast<double>(step), 0};
    AdamStep(pd, MakeTensor<double>({p}, g), md, vd, hyper, &pool);
    AdamStep(pf, MakeTensor<float>({p}, Cast<float>(g)), mf, vf, hyper, &pool);
  }
  ExpectNear(ToVector<float>(pf), ToVector<double>(pd), 1e-6, "param");
}

TEST(Adam, StepZeroIsRefused) {
  Tensor param = Filled<double>({2}, 1.0), grad = Filled<double>({2}, 1.0), m = Filled<double>({2}, 0.0),
         v = Filled<double>({2}, 0.0);
  const tessel_adam_params h = Params({0.1, 0.9, 0.999, 1e-8, 0, 0});
  const Status st = TryCallCpu("optim.adam.step", {&param, &grad, &m, &v}, {}, nullptr, &h, sizeof(h));
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
  EXPECT_EQ(param.data<double>()[0], 1.0);  // untouched
}

// step_rows is step with the dense gradient scattered from the rows: same bits, every row moved (weight
// decay and the moments act on rows without a gradient too), over several chunks of the pool.
TEST(Adam, StepRowsEqualsStepOnTheScatteredGradient) {
  ThreadPool pool(3);
  const int64_t p = 3000, d = 7, z = 900;
  std::vector<int32_t> row_of(static_cast<size_t>(p), -1);
  for (int64_t i = 0; i < z; ++i) row_of[static_cast<size_t>((i * 7 + 3) % p)] = static_cast<int32_t>(z - 1 - i);
  const auto p0 = RandomValues<double>(p * d, 1);
  Tensor dense_p = MakeTensor<double>({p * d}, p0), dense_m = Filled<double>({p * d}, 0.0),
         dense_v = Filled<double>({p * d}, 0.0);
  Tensor rows_p = MakeTensor<double>({p, d}, p0), rows_m = Filled<double>({p, d}, 0.0),
         rows_v = Filled<double>({p, d}, 0.0);
  const Tensor trow_of = MakeTensor<int32_t>({p}, row_of);
  for (int step = 1; step <= 3; ++step) {
    const auto rows = RandomValues<double>(z * d, 10 + step);
    std::vector<double> dense(static_cast<size_t>(p * d), 0.0);
    for (int64_t i = 0; i < p; ++i) {
      if (row_of[i] >= 0) std::copy_n(rows.begin() + row_of[i] * d, d, dense.begin() + i * d);
    }
    const std::vector<double> hyper = {0.01, 0.9, 0.999, 1e-8, 0.05, static_cast<double>(step)};
    AdamStep(dense_p, MakeTensor<double>({p * d}, dense), dense_m, dense_v, hyper, &pool);
    const Tensor grad_rows = MakeTensor<double>({z, d}, rows);
    CallCpuWith("optim.adam.step_rows", {&rows_p, &grad_rows, &trow_of, &rows_m, &rows_v}, {}, Params(hyper), &pool);
  }
  EXPECT_EQ(ToVector<double>(rows_p), ToVector<double>(dense_p));
  EXPECT_EQ(ToVector<double>(rows_m), ToVector<double>(dense_m));
  EXPECT_EQ(ToVector<double>(rows_v), ToVector<double>(dense_v));
}

TEST(Adam, StepRowsRefusesARowPastTheGradient) {
  Tensor param = Filled<double>({3, 2}, 1.0), grad_rows = Filled<double>({2, 2}, 1.0), m = Filled<double>({3, 2}, 0.0),
         v = Filled<double>({3, 2}, 0.0);
  const Tensor row_of = MakeTensor<int32_t>({3}, {0, -1, 2});
  const tessel_adam_params h = Params({0.1, 0.9, 0.999, 1e-8, 0, 1});
  const Status st =
      TryCallCpu("optim.adam.step_rows", {&param, &grad_rows, &row_of, &m, &v}, {}, nullptr, &h, sizeof(h));
  EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
  EXPECT_NE(st.message().find("row_of[2]"), std::string::npos) << st.ToString();
  EXPECT_EQ(ToVector<double>(param), std::vector<double>(6, 1.0));  // untouched
}

TEST(Adam, MissingParameterStructIsRefusedByTheHost) {
  Tensor param = Filled<double>({2}, 1.0), grad = Filled<double>({2}, 1.0), m = Filled<double>({2}, 0.0),
         v = Filled<double>({2}, 0.0);
  const Status st = TryCallCpu("optim.adam.step", {&param, &grad, &m, &v}, {}, nullptr);
  EXPECT_EQ(st.code(), Code::kInternal) << st.ToString();
  EXPECT_NE(st.message().find("parameter struct"), std::string::npos) << st.ToString();
  EXPECT_EQ(param.data<double>()[0], 1.0);
}

tessel_adamw_params AdamwParams(double lr, double weight_decay, double grad_scale, int64_t step) {
  return tessel_adamw_params{sizeof(tessel_adamw_params), lr, 0.9, 0.95, 1e-8, weight_decay, grad_scale, step};
}

// torch.optim.AdamW (decoupled weight decay, bias-corrected moments), in double, on a gradient scaled first.
struct AdamwReference {
  std::vector<double> p, m, v;
  void Step(const std::vector<double>& grad, const tessel_adamw_params& h) {
    const double bc1 = 1 - std::pow(h.beta1, static_cast<double>(h.step));
    const double bc2 = 1 - std::pow(h.beta2, static_cast<double>(h.step));
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = h.grad_scale * grad[i];
      p[i] -= h.lr * h.weight_decay * p[i];
      m[i] = h.beta1 * m[i] + (1 - h.beta1) * g;
      v[i] = h.beta2 * v[i] + (1 - h.beta2) * g * g;
      const double m_hat = m[i] / bc1, v_hat = v[i] / bc2;
      p[i] -= h.lr * m_hat / (std::sqrt(v_hat) + h.eps);
    }
  }
};

template <typename T>
class AdamwTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AdamwTest, FloatTypes);

TYPED_TEST(AdamwTest, StepsMatchTorchFormulaWithDecayAndGradScale) {
  using T = TypeParam;
  ThreadPool pool(3);
  const int64_t p = 100000;
  ASSERT_GT(PoolChunks(p, 1 << 14, 3), 1);  // the kernel's grain: several chunks run
  const auto p0 = RandomValues<T>(p, 1);
  AdamwReference ref{std::vector<double>(p0.begin(), p0.end()), std::vector<double>(p, 0.0),
                     std::vector<double>(p, 0.0)};
  Tensor param = MakeTensor<T>({p}, p0), m = Filled<T>({p}, T(0)), v = Filled<T>({p}, T(0));
  for (int step = 1; step <= 5; ++step) {
    const auto g = RandomValues<T>(p, 10 + step, -2, 2);
    // A large weight decay and a clipping scale below 1, so that both visibly move the result.
    const tessel_adamw_params h = AdamwParams(0.01, 0.5, step % 2 ? 0.25 : 1.0, step);
    ref.Step(std::vector<double>(g.begin(), g.end()), h);
    const Tensor grad = MakeTensor<T>({p}, g);
    CallCpuWith("optim.adamw.step", {&param, &grad, &m, &v}, {}, h, &pool);
  }
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-13;
  ExpectNear(ToVector<T>(param), ref.p, tol, "param");
  ExpectNear(ToVector<T>(m), ref.m, tol, "m");
  ExpectNear(ToVector<T>(v), ref.v, tol, "v");
}

// One element, one step, worked by hand: lr 0.1, wd 0.1, grad_scale 0.5, betas (0.9, 0.95), param 2,
// grad 4: g = 2; param = 2 * (1 - 0.01) = 1.98; m = 0.2; v = 0.2; m_hat = 2, v_hat = 4;
// param = 1.98 - 0.1 * 2 / (2 + 1e-8) = 1.8800000005.
TEST(Adamw, OneStepByHand) {
  Tensor param = MakeTensor<double>({1}, {2.0}), grad = MakeTensor<double>({1}, {4.0});
  Tensor m = Filled<double>({1}, 0.0), v = Filled<double>({1}, 0.0);
  CallCpuWith("optim.adamw.step", {&param, &grad, &m, &v}, {}, AdamwParams(0.1, 0.1, 0.5, 1), nullptr);
  EXPECT_NEAR(m.data<double>()[0], 0.2, 1e-15);
  EXPECT_NEAR(v.data<double>()[0], 0.2, 1e-15);
  EXPECT_NEAR(param.data<double>()[0], 1.8800000005, 1e-14);
}

TEST(Adamw, InvalidHyperparametersAreRefused) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const tessel_adamw_params good = AdamwParams(0.1, 0.01, 1.0, 1);
  std::vector<std::pair<std::string, tessel_adamw_params>> bad;
  auto with = [&](const std::string& what, auto edit) {
    tessel_adamw_params h = good;
    edit(h);
    bad.emplace_back(what, h);
  };
  with("step 0", [](auto& h) { h.step = 0; });
  with("beta1 1", [](auto& h) { h.beta1 = 1.0; });
  with("beta1 NaN", [&](auto& h) { h.beta1 = nan; });
  with("beta2 -0.1", [](auto& h) { h.beta2 = -0.1; });
  with("eps -1e-8", [](auto& h) { h.eps = -1e-8; });
  with("lr -0.1", [](auto& h) { h.lr = -0.1; });
  with("weight_decay -0.01", [](auto& h) { h.weight_decay = -0.01; });
  with("grad_scale -1", [](auto& h) { h.grad_scale = -1; });
  with("grad_scale inf", [&](auto& h) { h.grad_scale = inf; });
  with("grad_scale NaN", [&](auto& h) { h.grad_scale = nan; });
  for (const auto& [what, h] : bad) {
    SCOPED_TRACE(what);
    Tensor param = Filled<double>({2}, 1.0), grad = Filled<double>({2}, 1.0), m = Filled<double>({2}, 0.0),
           v = Filled<double>({2}, 0.0);
    const Status st = TryCallCpu("optim.adamw.step", {&param, &grad, &m, &v}, {}, nullptr, &h, sizeof(h));
    EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
    EXPECT_EQ(ToVector<double>(param), std::vector<double>(2, 1.0));  // untouched
  }
  // The edges that are allowed: a zero scale (a step of decay and moments only), beta 0, lr 0.
  tessel_adamw_params edge = good;
  edge.grad_scale = 0;
  edge.beta1 = 0;
  edge.lr = 0;
  Tensor param = Filled<double>({2}, 1.0), grad = Filled<double>({2}, 1.0), m = Filled<double>({2}, 0.0),
         v = Filled<double>({2}, 0.0);
  const Status st = TryCallCpu("optim.adamw.step", {&param, &grad, &m, &v}, {}, nullptr, &edge, sizeof(edge));
  EXPECT_TRUE(st.ok()) << st.ToString();
}

}  // namespace
}  // namespace tessel::kernel_test

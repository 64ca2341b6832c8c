// optim.adam.step against torch.optim.Adam's update, worked by hand for two steps; optim.adam.step_rows
// against optim.adam.step.
#include <gtest/gtest.h>
#include <tessel/ops/optim.h>

#include <cmath>

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

}  // namespace
}  // namespace tessel::kernel_test

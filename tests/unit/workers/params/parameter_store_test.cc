// ParameterStore and AdamOptimizer: layout, seeded initialisation, Adam through the real kernel, and
// save/load.
#include "workers/params/parameter_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace tessel::workers {
namespace {

KernelRegistry LoadNn() {
  KernelRegistry registry;
  const Status st = registry.LoadPlugin(std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_nn.so");
  EXPECT_TRUE(st.ok()) << st.ToString();
  return registry;
}

ParameterStore TwoParameters() {
  ParameterStore p;
  p.Add({"layer0.weight", {3, 4, 5}, ParamInit::kWeight, Decay::kL2});
  p.Add({"layer0.skip", {2}, ParamInit::kOnes, Decay::kNone});
  return p;
}

TEST(ParameterStore, LaysParametersOutFlatInDeclarationOrder) {
  ParameterStore p = TwoParameters();
  ASSERT_TRUE(p.Allocate(DeviceContext{}, 1).ok());
  EXPECT_EQ(p.num_values(), 62);
  EXPECT_EQ(p.offset(0), 0);
  EXPECT_EQ(p.offset(1), 60);
  EXPECT_EQ(p.value(1).data<float>(), p.flat_value().data<float>() + 60);
  EXPECT_EQ(p.grad(1).data<float>(), p.flat_grad().data<float>() + 60);
  EXPECT_EQ(p.value(0).shape(), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(p.Find("layer0.skip"), 1);
  EXPECT_EQ(p.Find("nope"), -1);
  for (int64_t i = 0; i < 62; ++i) EXPECT_EQ(p.flat_grad().data<float>()[i], 0.0f);
  EXPECT_EQ(p.value(1).data<float>()[0], 1.0f);
}

TEST(ParameterStore, GlorotFromTheSeedAloneWithinItsBound) {
  ParameterStore a = TwoParameters(), b = TwoParameters(), c = TwoParameters();
  ASSERT_TRUE(a.Allocate(DeviceContext{}, 7).ok());
  ASSERT_TRUE(b.Allocate(DeviceContext{}, 7).ok());
  ASSERT_TRUE(c.Allocate(DeviceContext{}, 8).ok());
  const float bound = static_cast<float>(std::sqrt(6.0 / (4 + 5)));  // fan_in 4, fan_out 5: the last two dims
  float max_abs = 0;
  bool differs = false;
  for (int64_t i = 0; i < 60; ++i) {
    EXPECT_EQ(a.value(0).data<float>()[i], b.value(0).data<float>()[i]);
    differs |= a.value(0).data<float>()[i] != c.value(0).data<float>()[i];
    max_abs = std::max(max_abs, std::abs(a.value(0).data<float>()[i]));
  }
  EXPECT_TRUE(differs) << "another seed, other values";
  EXPECT_LE(max_abs, bound);
  EXPECT_GT(max_abs, 0.5f * bound) << "60 draws should come near the bound";
}

// Weights of 2000 draws and a bias of 2000: the largest |value| of each lands within 1% of its bound.
ParameterStore WeightAndBias() {
  ParameterStore p;
  p.Add({"layer0.k", {2, 40, 25}, ParamInit::kWeight, Decay::kL2});                // fan_in 40, fan_out 25
  p.Add({"layer0.k_bias", {80, 25}, ParamInit::kBias, Decay::kL2, /*fan_in=*/9});  // the weight's fan-in
  return p;
}

float MaxAbs(const Tensor& t) {
  float m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(t.data<float>()[i]));
  return m;
}

TEST(ParameterStore, GlorotWeightsGetZeroBiases) {
  ParameterStore p = WeightAndBias();
  ASSERT_TRUE(p.Allocate(DeviceContext{}, 3, WeightInit::kGlorot).ok());
  const float bound = static_cast<float>(std::sqrt(6.0 / (40 + 25)));
  EXPECT_LE(MaxAbs(p.value(0)), bound);
  EXPECT_GT(MaxAbs(p.value(0)), 0.99f * bound);
  EXPECT_EQ(MaxAbs(p.value(1)), 0.0f);
}

TEST(ParameterStore, TorchLinearDrawsWeightsAndBiasesOverTheirFanIn) {
  ParameterStore p = WeightAndBias();
  ASSERT_TRUE(p.Allocate(DeviceContext{}, 3, WeightInit::kTorchLinear).ok());
  const float weight = static_cast<float>(1.0 / std::sqrt(40.0)), bias = static_cast<float>(1.0 / 3.0);
  EXPECT_LE(MaxAbs(p.value(0)), weight);
  EXPECT_GT(MaxAbs(p.value(0)), 0.99f * weight);
  EXPECT_LE(MaxAbs(p.value(1)), bias);
  EXPECT_GT(MaxAbs(p.value(1)), 0.99f * bias);
}

TEST(AdamOptimizer, DecaysOnlyTheParametersDeclaredSo) {
  const KernelRegistry kernels = LoadNn();
  ParameterStore p = TwoParameters();
  ASSERT_TRUE(p.Allocate(DeviceContext{}, 1).ok());
  AdamOptimizer adam(AdamOptimizer::Hyper{0.1, 0.9, 0.999, 1e-8, 0.5});
  ASSERT_TRUE(adam.Allocate(p).ok());
  const float w0 = p.value(0).data<float>()[0];
  // Zero gradients: only weight decay moves a parameter. The first Adam step moves it by lr * sign(g).
  ASSERT_TRUE(adam.Step(p, *kernels.Find("optim.adam.step", Device::kCpu).value(), nullptr, CallOptions{}).ok());
  EXPECT_NEAR(p.value(0).data<float>()[0], w0 - (w0 > 0 ? 0.1f : -0.1f), 1e-6);
  EXPECT_EQ(p.value(1).data<float>()[0], 1.0f) << "no decay, no gradient: unchanged";
  EXPECT_EQ(adam.steps(), 1);
}

TEST(AdamOptimizer, SavedStateRestoresValuesMomentsAndStep) {
  const KernelRegistry kernels = LoadNn();
  const Kernel& kernel = *kernels.Find("optim.adam.step", Device::kCpu).value();
  ParameterStore p = TwoParameters();
  ASSERT_TRUE(p.Allocate(DeviceContext{}, 1).ok());
  AdamOptimizer adam(AdamOptimizer::Hyper{0.1, 0.9, 0.999, 1e-8, 0});
  ASSERT_TRUE(adam.Allocate(p).ok());
  for (int64_t i = 0; i < p.num_values(); ++i) p.flat_grad().data<float>()[i] = 0.01f * static_cast<float>(i % 7);
  ASSERT_TRUE(adam.Step(p, kernel, nullptr, CallOptions{}).ok());
  MemoryState state;
  ASSERT_TRUE(p.SaveState(state).ok());
  ASSERT_TRUE(adam.SaveState(state).ok());
  ASSERT_TRUE(adam.Step(p, kernel, nullptr, CallOptions{}).ok());
  const std::vector<float> after(p.flat_value().data<float>(), p.flat_value().data<float>() + p.num_values());

  ParameterStore q = TwoParameters();
  ASSERT_TRUE(q.Allocate(DeviceContext{}, 99).ok());
  AdamOptimizer restored(AdamOptimizer::Hyper{0.1, 0.9, 0.999, 1e-8, 0});
  ASSERT_TRUE(restored.Allocate(q).ok());
  ASSERT_TRUE(q.LoadState(state).ok());
  ASSERT_TRUE(restored.LoadState(state).ok());
  EXPECT_EQ(restored.steps(), 1);
  std::copy(p.flat_grad().data<float>(), p.flat_grad().data<float>() + p.num_values(), q.flat_grad().data<float>());
  ASSERT_TRUE(restored.Step(q, kernel, nullptr, CallOptions{}).ok());
  for (int64_t i = 0; i < q.num_values(); ++i)
    EXPECT_EQ(q.flat_value().data<float>()[i], after[static_cast<size_t>(i)]) << i;
}

// A row gradient: the store holds [grad_rows, D] rows for it, and Adam's update through step_rows is the
// dense update of the scattered rows (another store, dense, given the same gradient).
TEST(AdamOptimizer, RowGradientStepsLikeTheDenseGradientItStandsFor) {
  const KernelRegistry kernels = LoadNn();
  const Kernel& dense_kernel = *kernels.Find("optim.adam.step", Device::kCpu).value();
  const Kernel& rows_kernel = *kernels.Find("optim.adam.step_rows", Device::kCpu).value();
  ParameterSpec table{"layer0.weight", {2, 3, 4}, ParamInit::kWeight, Decay::kL2};
  ParameterStore dense;
  dense.Add(table);
  dense.Add({"layer1.weight", {2, 2}});
  table.row_of = {-1, 1, -1, 0, -1, -1};  // 6 rows of 4; rows 1 and 3 have gradient rows 1 and 0
  table.grad_rows = 2;
  ParameterStore rows;
  rows.Add(table);
  rows.Add({"layer1.weight", {2, 2}});
  ASSERT_TRUE(dense.Allocate(DeviceContext{}, 3).ok());
  ASSERT_TRUE(rows.Allocate(DeviceContext{}, 3).ok());
  EXPECT_TRUE(rows.has_row_gradients());
  EXPECT_FALSE(dense.has_row_gradients());
  EXPECT_EQ(rows.grad(0).shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(rows.num_grad_values(), 8 + 4);
  EXPECT_EQ(rows.grad(1).data<float>(), rows.flat_grad().data<float>() + 8);
  AdamOptimizer a(AdamOptimizer::Hyper{0.1, 0.9, 0.999, 1e-8, 0.01}),
      b(AdamOptimizer::Hyper{0.1, 0.9, 0.999, 1e-8, 0.01});
  ASSERT_TRUE(a.Allocate(dense).ok());
  ASSERT_TRUE(b.Allocate(rows).ok());
  for (int step = 0; step < 3; ++step) {
    for (int64_t i = 0; i < 8; ++i) rows.grad(0).data<float>()[i] = 0.1f * static_cast<float>(i + step) - 0.3f;
    std::fill_n(dense.grad(0).data<float>(), 24, 0.0f);
    std::copy_n(rows.grad(0).data<float>() + 4, 4, dense.grad(0).data<float>() + 4);  // row 1 <- gradient row 1
    std::copy_n(rows.grad(0).data<float>(), 4, dense.grad(0).data<float>() + 12);     // row 3 <- gradient row 0
    for (int64_t i = 0; i < 4; ++i)
      rows.grad(1).data<float>()[i] = dense.grad(1).data<float>()[i] = 0.2f * static_cast<float>(i);
    ASSERT_TRUE(a.Step(dense, dense_kernel, nullptr, CallOptions{}).ok());
    ASSERT_TRUE(b.Step(rows, dense_kernel, &rows_kernel, CallOptions{}).ok());
  }
  for (int64_t i = 0; i < dense.num_values(); ++i) {
    EXPECT_EQ(rows.flat_value().data<float>()[i], dense.flat_value().data<float>()[i]) << i;
  }
  // Without the step_rows kernel the step is refused, not done densely on the wrong buffer.
  EXPECT_EQ(b.Step(rows, dense_kernel, nullptr, CallOptions{}).code(), Code::kInternal);
}

TEST(ParameterStore, RowGradientMustCoverEveryRow) {
  ParameterStore p;
  ParameterSpec spec{"t", {4, 2}};
  spec.row_of = {0, -1, 1};  // 3 entries for 4 rows
  spec.grad_rows = 2;
  p.Add(spec);
  EXPECT_EQ(p.Allocate(DeviceContext{}, 1).code(), Code::kInternal);
}

TEST(ParameterStore, LoadRefusesAShapeMismatchNamingTheTensor) {
  MemoryState state;
  ParameterStore small;
  small.Add({"layer0.weight", {2, 2}});
  ASSERT_TRUE(small.Allocate(DeviceContext{}, 1).ok());
  ASSERT_TRUE(small.SaveState(state).ok());
  ParameterStore big;
  big.Add({"layer0.weight", {3, 2}});
  ASSERT_TRUE(big.Allocate(DeviceContext{}, 1).ok());
  const Status st = big.LoadState(state);
  EXPECT_EQ(st.code(), Code::kStorage);
  EXPECT_NE(st.message().find("param/layer0.weight"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tessel::workers

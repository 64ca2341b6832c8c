// ParameterStore and AdamOptimizer: layout, seeded initialisation, Adam through the real kernel, and
// save/load.
#include "workers/params/parameter_store.h"

#include <gtest/gtest.h>

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
  p.Add({"layer0.weight", {3, 4, 5}, ParamInit::kGlorot, Decay::kL2});
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

TEST(AdamOptimizer, DecaysOnlyTheParametersDeclaredSo) {
  const KernelRegistry kernels = LoadNn();
  ParameterStore p = TwoParameters();
  ASSERT_TRUE(p.Allocate(DeviceContext{}, 1).ok());
  AdamOptimizer adam(AdamOptimizer::Hyper{0.1, 0.9, 0.999, 1e-8, 0.5});
  ASSERT_TRUE(adam.Allocate(p).ok());
  const float w0 = p.value(0).data<float>()[0];
  // Zero gradients: only weight decay moves a parameter. The first Adam step moves it by lr * sign(g).
  ASSERT_TRUE(adam.Step(p, *kernels.Find("optim.adam.step", Device::kCpu).value(), CallOptions{}).ok());
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
  ASSERT_TRUE(adam.Step(p, kernel, CallOptions{}).ok());
  MemoryState state;
  ASSERT_TRUE(p.SaveState(state).ok());
  ASSERT_TRUE(adam.SaveState(state).ok());
  ASSERT_TRUE(adam.Step(p, kernel, CallOptions{}).ok());
  const std::vector<float> after(p.flat_value().data<float>(), p.flat_value().data<float>() + p.num_values());

  ParameterStore q = TwoParameters();
  ASSERT_TRUE(q.Allocate(DeviceContext{}, 99).ok());
  AdamOptimizer restored(AdamOptimizer::Hyper{0.1, 0.9, 0.999, 1e-8, 0});
  ASSERT_TRUE(restored.Allocate(q).ok());
  ASSERT_TRUE(q.LoadState(state).ok());
  ASSERT_TRUE(restored.LoadState(state).ok());
  EXPECT_EQ(restored.steps(), 1);
  std::copy(p.flat_grad().data<float>(), p.flat_grad().data<float>() + p.num_values(), q.flat_grad().data<float>());
  ASSERT_TRUE(restored.Step(q, kernel, CallOptions{}).ok());
  for (int64_t i = 0; i < q.num_values(); ++i) EXPECT_EQ(q.flat_value().data<float>()[i], after[static_cast<size_t>(i)]) << i;
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

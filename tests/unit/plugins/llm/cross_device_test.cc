// Every CUDA kernel of libtessel_llm.so against its CPU counterpart on fresh random inputs, with a
// tolerance per dtype (float: sums in another order, CUDA's expf against the CPU's polynomial; double:
// rounding only). Skipped, with the reason, when Tessel was built without CUDA or no GPU is visible.
#include <gtest/gtest.h>
#include <tessel/ops/llm.h>

#include <string>
#include <utility>
#include <vector>

#include "llm_test_util.h"
#include "workers/plugin_host/op_table.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class LlmCrossDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override { RequireLlmCudaKernels(workers::OpsOfFamily("llm")); }
  static double Tol() { return std::is_same_v<T, float> ? 2e-4 : 1e-10; }
};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LlmCrossDeviceTest, FloatTypes);

TYPED_TEST(LlmCrossDeviceTest, Encoder) {
  using T = TypeParam;
  const int64_t v = 300, p = 80, b = 3, s = 70, c = 96;
  Tensor tokens = MakeTensor<int32_t>({b, s}, RandomTokens(b * s, 40, 1));  // many repeats
  CompareLlmDevices(
      "llm.encoder.fwd",
      {MakeTensor<T>({v, c}, RandomValues<T>(v * c, 2)), MakeTensor<T>({p, c}, RandomValues<T>(p * c, 3)), tokens},
      {Filled<T>({b, s, c}, T(3))}, this->Tol());
  CompareLlmDevices(
      "llm.encoder.bwd", {MakeTensor<T>({b, s, c}, RandomValues<T>(b * s * c, 4)), tokens},
      {MakeTensor<T>({v, c}, RandomValues<T>(v * c, 5)), MakeTensor<T>({p, c}, RandomValues<T>(p * c, 6))},
      this->Tol());
}

TYPED_TEST(LlmCrossDeviceTest, Layernorm) {
  using T = TypeParam;
  const int64_t n = 300, c = 200;
  const tessel_layernorm_params params{sizeof(tessel_layernorm_params), 1e-5};
  Tensor x = MakeTensor<T>({n, c}, RandomValues<T>(n * c, 1, -3, 4)), w = MakeTensor<T>({c}, RandomValues<T>(c, 2));
  CompareLlmDevicesWith("llm.layernorm.fwd", {x, w, MakeTensor<T>({c}, RandomValues<T>(c, 3))},
                        {Filled<T>({n, c}, T(3)), Filled<T>({n}, T(3)), Filled<T>({n}, T(3))}, this->Tol(), params);
  // mean and rstd from the CPU forward, so both devices differentiate the same normalisation.
  Tensor y = Filled<T>({n, c}, T(0)), mean = Filled<T>({n}, T(0)), rstd = Filled<T>({n}, T(0));
  Tensor b = MakeTensor<T>({c}, RandomValues<T>(c, 3));
  CallLlmWith("llm.layernorm.fwd", {&x, &w, &b}, {&y, &mean, &rstd}, params, nullptr);
  CompareLlmDevices("llm.layernorm.bwd", {MakeTensor<T>({n, c}, RandomValues<T>(n * c, 4)), x, w, mean, rstd},
                    {MakeTensor<T>({n, c}, RandomValues<T>(n * c, 5)), MakeTensor<T>({c}, RandomValues<T>(c, 6)),
                     MakeTensor<T>({c}, RandomValues<T>(c, 7))},
                    this->Tol());
  Tensor w_away_from_zero = MakeTensor<T>({c}, RandomValues<T>(c, 8, 0.5, 1.5));
  CallLlmWith("llm.layernorm.fwd", {&x, &w_away_from_zero, &b}, {&y, &mean, &rstd}, params, nullptr);
  CompareLlmDevices("llm.layernorm.bwd_from_output",
                    {MakeTensor<T>({n, c}, RandomValues<T>(n * c, 4)), y, w_away_from_zero, b, rstd},
                    {MakeTensor<T>({n, c}, RandomValues<T>(n * c, 5)), MakeTensor<T>({c}, RandomValues<T>(c, 6)),
                     MakeTensor<T>({c}, RandomValues<T>(c, 7))},
                    this->Tol());
}

// The CUDA kernels work on tiles of 64 (float) or 32 (double) positions with a head size up to 128, in
// two register layouts (hs <= 64 and above): S = 1; S = 130 and 150, whose last tiles are partial; odd
// head sizes (5, 65); hs = 128, the limit; and GPT-2's hs = 64 over 1024 positions.
TYPED_TEST(LlmCrossDeviceTest, Attention) {
  using T = TypeParam;
  struct Case {
    int64_t b, s, c, h;
  };
  for (const Case& k : {Case{2, 150, 48, 3}, Case{2, 1, 15, 3}, Case{1, 130, 15, 3}, Case{1, 65, 130, 2},
                        Case{1, 70, 256, 2}, Case{1, 1024, 128, 2}}) {
    const int64_t b = k.b, s = k.s, c = k.c, h = k.h;
    SCOPED_TRACE("B " + std::to_string(b) + " S " + std::to_string(s) + " C " + std::to_string(c) + " H " +
                 std::to_string(h));
    const tessel_attention_params params{sizeof(tessel_attention_params), static_cast<int32_t>(h)};
    Tensor qkv = MakeTensor<T>({b, s, 3 * c}, RandomValues<T>(b * s * 3 * c, 1, -2, 2));
    CompareLlmDevicesWith("llm.attention.fwd", {qkv}, {Filled<T>({b, s, c}, T(3)), Filled<T>({b, h, s}, T(3))},
                          this->Tol(), params);
    Tensor y = Filled<T>({b, s, c}, T(0)), lse = Filled<T>({b, h, s}, T(0));
    ThreadPool pool(2);
    CallLlmWith("llm.attention.fwd", {&qkv}, {&y, &lse}, params, &pool);
    CompareLlmDevicesWith("llm.attention.bwd", {MakeTensor<T>({b, s, c}, RandomValues<T>(b * s * c, 2)), qkv, y, lse},
                          {Filled<T>({b, s, 3 * c}, T(3))}, this->Tol(), params);
  }
}

// bf16: each CUDA kernel (widened to f32, or on the tensor cores, rounded where the CPU's bf16 reference
// rounds) against the CPU's bf16 kernel. A bf16 output may differ by a rounding step (2^-8 relative) where the f32 sums
// ran in another order; the f32 outputs (statistics, lse, weight gradients) only by that order.
TEST(LlmCrossDeviceBf16, EncoderLayernormAttention) {
  RequireLlmCudaKernels(workers::OpsOfFamily("llm"));
  if (IsSkipped()) return;
  constexpr double kTol = 2e-2, kF32Tol = 1e-3;
  const auto fill = [](std::vector<int64_t> shape) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    return Bf16Tensor(shape, std::vector<float>(static_cast<size_t>(n), 3.f));
  };
  const int64_t v = 300, p = 80, b = 3, s = 70, c = 96;
  Tensor tokens = MakeTensor<int32_t>({b, s}, RandomTokens(b * s, 40, 1));
  CompareLlmDevices(
      "llm.encoder.fwd",
      {Bf16Tensor({v, c}, Bf16Representable(v * c, 2)), Bf16Tensor({p, c}, Bf16Representable(p * c, 3)), tokens},
      {fill({b, s, c})}, kTol);
  CompareLlmDevices("llm.encoder.bwd", {Bf16Tensor({b, s, c}, Bf16Representable(b * s * c, 4)), tokens},
                    {MakeTensor<float>({v, c}, RandomValues<float>(v * c, 5)),
                     MakeTensor<float>({p, c}, RandomValues<float>(p * c, 6))},
                    kF32Tol);

  const int64_t n = 300, w_c = 200;
  const tessel_layernorm_params ln{sizeof(tessel_layernorm_params), 1e-5};
  Tensor x = Bf16Tensor({n, w_c}, Bf16Representable(n * w_c, 1, -3, 4));
  Tensor w = Bf16Tensor({w_c}, Bf16Representable(w_c, 2, 0.5, 1.5)),
         bias = Bf16Tensor({w_c}, Bf16Representable(w_c, 3));
  CompareLlmDevicesWith("llm.layernorm.fwd", {x, w, bias},
                        {fill({n, w_c}), Filled<float>({n}, 3.f), Filled<float>({n}, 3.f)}, kTol, ln);
  Tensor y = fill({n, w_c}), mean = Filled<float>({n}, 0.f), rstd = Filled<float>({n}, 0.f);
  CallLlmWith("llm.layernorm.fwd", {&x, &w, &bias}, {&y, &mean, &rstd}, ln, nullptr);
  Tensor dy = Bf16Tensor({n, w_c}, Bf16Representable(n * w_c, 4));
  const auto grads = [&] {
    return std::vector<Tensor>{Bf16Tensor({n, w_c}, Bf16Representable(n * w_c, 5)),
                               MakeTensor<float>({w_c}, RandomValues<float>(w_c, 6)),
                               MakeTensor<float>({w_c}, RandomValues<float>(w_c, 7))};
  };
  CompareLlmDevices("llm.layernorm.bwd", {dy, x, w, mean, rstd}, grads(), kTol);
  CompareLlmDevices("llm.layernorm.bwd_from_output", {dy, y, w, bias, rstd}, grads(), kTol);

  // Attention on the tensor cores: head sizes 64 (GPT-2's), 128 (the limit: 8 fragments a row), 24 (16-byte
  // loads, padded to 32) and 20 (element loads, padded); 150 positions (3 tiles, the last partial).
  ThreadPool pool(2);
  for (const auto& [ac, ah] : std::vector<std::pair<int64_t, int64_t>>{{128, 2}, {256, 2}, {96, 4}, {40, 2}}) {
    SCOPED_TRACE("C " + std::to_string(ac) + ", heads " + std::to_string(ah));
    const int64_t ab = 2, as = 150;
    const tessel_attention_params at{sizeof(tessel_attention_params), static_cast<int32_t>(ah)};
    Tensor qkv = Bf16Tensor({ab, as, 3 * ac}, Bf16Representable(ab * as * 3 * ac, 1, -2, 2));
    CompareLlmDevicesWith("llm.attention.fwd", {qkv}, {fill({ab, as, ac}), Filled<float>({ab, ah, as}, 3.f)}, kTol, at);
    Tensor ay = fill({ab, as, ac}), lse = Filled<float>({ab, ah, as}, 0.f);
    CallLlmWith("llm.attention.fwd", {&qkv}, {&ay, &lse}, at, &pool);
    CompareLlmDevicesWith("llm.attention.bwd",
                          {Bf16Tensor({ab, as, ac}, Bf16Representable(ab * as * ac, 2)), qkv, ay, lse},
                          {fill({ab, as, 3 * ac})}, kTol, at);
  }
}

TEST(LlmCudaAttention, HeadSizeAboveTheLimitIsInvalid) {
  RequireLlmCudaKernels(workers::OpsOfFamily("llm"));
  if (IsSkipped()) return;
  const int64_t b = 1, s = 4, c = 2 * 129, h = 2;  // hs = 129
  const tessel_attention_params params{sizeof(tessel_attention_params), static_cast<int32_t>(h)};
  Tensor qkv = Filled<float>({b, s, 3 * c}, 0.5f), y = Filled<float>({b, s, c}, 0.f),
         lse = Filled<float>({b, h, s}, 0.f);
  Status st = TryCallCudaWith("llm.attention.fwd", {qkv}, {y, lse}, params);
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
  EXPECT_NE(st.message().find("llm.attention.fwd"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("128"), std::string::npos) << st.message();
  st = TryCallCudaWith("llm.attention.bwd", {Filled<float>({b, s, c}, 1.f), qkv, y, lse},
                       {Filled<float>({b, s, 3 * c}, 0.f)}, params);
  EXPECT_EQ(st.code(), Code::kUsage) << st.ToString();
  EXPECT_NE(st.message().find("llm.attention.bwd"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tessel::kernel_test

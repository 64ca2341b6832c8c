// The bf16 kernels of libtessel_llm.so against their own f32 kernels on the same (bf16-representable)
// values: outputs stored as bf16 are exactly the f32 kernel's rounded once; the statistics (mean, rstd,
// lse) and the parameter gradients (A = f32) are exactly the f32 kernel's. So the bf16 path rounds at the
// points the GPU's does and nowhere else. Attention rounds two more (its probabilities and dS, the operands
// of the tensor cores' products), so its Y and dqkv are the f32 kernel's within bf16's rounding.
#include <gtest/gtest.h>
#include <tessel/ops/llm.h>

#include "llm_test_util.h"

namespace tessel::kernel_test {
namespace {

TEST(LlmBf16Kernels, LayernormRoundsOnlyItsOutputsAndKeepsF32Statistics) {
  ThreadPool pool(2);
  const int64_t n = 45, c = 97;
  const std::vector<float> x = Bf16Representable(n * c, 1, -3, 3), w = Bf16Representable(c, 2, 0.5, 1.5);
  const std::vector<float> b = Bf16Representable(c, 3), dy = Bf16Representable(n * c, 4);
  const std::vector<float> dx0 = Bf16Representable(n * c, 5);  // the residual gradient dX adds to
  const tessel_layernorm_params ln{sizeof(tessel_layernorm_params), 1e-5};
  Tensor bx = Bf16Tensor({n, c}, x), bw = Bf16Tensor({c}, w), bb = Bf16Tensor({c}, b);
  Tensor by = Bf16Tensor({n, c}, std::vector<float>(n * c, 0));
  Tensor bmean = Filled<float>({n}, 0.0f), brstd = Filled<float>({n}, 0.0f);
  CallLlmWith("llm.layernorm.fwd", {&bx, &bw, &bb}, {&by, &bmean, &brstd}, ln, &pool);
  Tensor fx = MakeTensor<float>({n, c}, x), fw = MakeTensor<float>({c}, w), fb = MakeTensor<float>({c}, b);
  Tensor fy = Filled<float>({n, c}, 0.0f), fmean = Filled<float>({n}, 0.0f), frstd = Filled<float>({n}, 0.0f);
  CallLlmWith("llm.layernorm.fwd", {&fx, &fw, &fb}, {&fy, &fmean, &frstd}, ln, &pool);
  ExpectSameBits(Widen(by), Rounded(ToVector<float>(fy)), "Y");
  ExpectSameBits(ToVector<float>(bmean), ToVector<float>(fmean), "mean");
  ExpectSameBits(ToVector<float>(brstd), ToVector<float>(frstd), "rstd");
  // A bf16 mean is refused: statistics are A (f32).
  Tensor wrong = Bf16Tensor({n}, std::vector<float>(n, 0));
  EXPECT_FALSE(TryCallLlmWith("llm.layernorm.fwd", {&bx, &bw, &bb}, {&by, &wrong, &brstd}, ln, &pool).ok());

  // Both backwards: dX (bf16, added to what it holds) rounded once after the add; dw, db f32.
  for (const char* op : {"llm.layernorm.bwd", "llm.layernorm.bwd_from_output"}) {
    SCOPED_TRACE(op);
    const bool from_output = std::string(op).ends_with("from_output");
    Tensor bdy = Bf16Tensor({n, c}, dy), bdx = Bf16Tensor({n, c}, dx0);
    Tensor bdw = Filled<float>({c}, 0.5f), bdb = Filled<float>({c}, -0.5f);
    Tensor fdy = MakeTensor<float>({n, c}, dy), fdx = MakeTensor<float>({n, c}, dx0);
    Tensor fdw = Filled<float>({c}, 0.5f), fdb = Filled<float>({c}, -0.5f);
    // bwd_from_output reads the forward's output: the bf16 run its bf16 Y, the f32 run the same values.
    Tensor fy_saved = MakeTensor<float>({n, c}, Widen(by));
    if (from_output) {
      CallLlm(op, {&bdy, &by, &bw, &bb, &brstd}, {&bdx, &bdw, &bdb}, &pool);
      CallLlm(op, {&fdy, &fy_saved, &fw, &fb, &frstd}, {&fdx, &fdw, &fdb}, &pool);
    } else {
      CallLlm(op, {&bdy, &bx, &bw, &bmean, &brstd}, {&bdx, &bdw, &bdb}, &pool);
      CallLlm(op, {&fdy, &fx, &fw, &fmean, &frstd}, {&fdx, &fdw, &fdb}, &pool);
    }
    ExpectSameBits(Widen(bdx), Rounded(ToVector<float>(fdx)), "dX");
    ExpectSameBits(ToVector<float>(bdw), ToVector<float>(fdw), "dw");
    ExpectSameBits(ToVector<float>(bdb), ToVector<float>(fdb), "db");
  }
}

TEST(LlmBf16Kernels, EncoderRoundsItsSumAndAccumulatesF32Gradients) {
  ThreadPool pool(2);
  const int64_t v = 50, p = 16, b = 3, s = 11, c = 24;
  const std::vector<float> wte = Bf16Representable(v * c, 6), wpe = Bf16Representable(p * c, 7);
  const std::vector<float> dy = Bf16Representable(b * s * c, 8);
  Tensor tokens = MakeTensor<int32_t>({b, s}, RandomTokens(b * s, static_cast<int32_t>(v), 9));
  Tensor bte = Bf16Tensor({v, c}, wte), bpe = Bf16Tensor({p, c}, wpe);
  Tensor by = Bf16Tensor({b, s, c}, std::vector<float>(b * s * c, 0));
  CallLlm("llm.encoder.fwd", {&bte, &bpe, &tokens}, {&by}, &pool);
  Tensor fte = MakeTensor<float>({v, c}, wte), fpe = MakeTensor<float>({p, c}, wpe);
  Tensor fy = Filled<float>({b, s, c}, 0.0f);
  CallLlm("llm.encoder.fwd", {&fte, &fpe, &tokens}, {&fy}, &pool);
  ExpectSameBits(Widen(by), Rounded(ToVector<float>(fy)), "Y");
  Tensor bdy = Bf16Tensor({b, s, c}, dy), fdy = MakeTensor<float>({b, s, c}, dy);
  Tensor bdte = Filled<float>({v, c}, 0.25f), bdpe = Filled<float>({p, c}, 0.25f);
  Tensor fdte = Filled<float>({v, c}, 0.25f), fdpe = Filled<float>({p, c}, 0.25f);
  CallLlm("llm.encoder.bwd", {&bdy, &tokens}, {&bdte, &bdpe}, &pool);
  CallLlm("llm.encoder.bwd", {&fdy, &tokens}, {&fdte, &fdpe}, &pool);
  ExpectSameBits(ToVector<float>(bdte), ToVector<float>(fdte), "dwte");
  ExpectSameBits(ToVector<float>(bdpe), ToVector<float>(fdpe), "dwpe");
}

// The tiled attention under bf16: two query and two key tiles (S 130), heads of 16. lse is exactly the f32
// kernel's (the row sums are of the f32 probabilities). Y and dqkv are within bf16's rounding of the f32
// kernel's: besides rounding them once, the bf16 path rounds P and dS to bf16 before it multiplies them
// (as the CUDA kernels do on the tensor cores), a relative 2^-9 on each term of sums of 130.
TEST(LlmBf16Kernels, AttentionIsF32sWithinBf16RoundingAndKeepsF32Lse) {
  ThreadPool pool(2);
  const int64_t b = 2, s = 130, c = 32, h = 2;
  constexpr double kTol = 1e-2;  // 2.5 steps of bf16 (2^-8), relative to each value or to Y's RMS
  const std::vector<float> qkv = Bf16Representable(b * s * 3 * c, 10, -2, 2), dy = Bf16Representable(b * s * c, 11);
  const tessel_attention_params at{sizeof(tessel_attention_params), static_cast<int32_t>(h)};
  Tensor bqkv = Bf16Tensor({b, s, 3 * c}, qkv), by = Bf16Tensor({b, s, c}, std::vector<float>(b * s * c, 0));
  Tensor blse = Filled<float>({b, h, s}, 0.0f);
  CallLlmWith("llm.attention.fwd", {&bqkv}, {&by, &blse}, at, &pool);
  Tensor fqkv = MakeTensor<float>({b, s, 3 * c}, qkv), fy = Filled<float>({b, s, c}, 0.0f);
  Tensor flse = Filled<float>({b, h, s}, 0.0f);
  CallLlmWith("llm.attention.fwd", {&fqkv}, {&fy, &flse}, at, &pool);
  ExpectNear(Widen(by), ToVector<float>(fy), kTol, "Y");
  ExpectSameBits(ToVector<float>(blse), ToVector<float>(flse), "lse");
  // The backward reads the forward's (bf16) Y: the f32 run gets the same values.
  Tensor bdy = Bf16Tensor({b, s, c}, dy), fdy = MakeTensor<float>({b, s, c}, dy);
  Tensor fy_saved = MakeTensor<float>({b, s, c}, Widen(by));
  Tensor bdqkv = Bf16Tensor({b, s, 3 * c}, std::vector<float>(b * s * 3 * c, 5));
  Tensor fdqkv = Filled<float>({b, s, 3 * c}, 5.0f);
  CallLlmWith("llm.attention.bwd", {&bdy, &bqkv, &by, &blse}, {&bdqkv}, at, &pool);
  CallLlmWith("llm.attention.bwd", {&fdy, &fqkv, &fy_saved, &flse}, {&fdqkv}, at, &pool);
  // The backward rounds its products and sums to bf16 as it goes: its dqkv is within 1.4% of the f32
  // kernel's (relative to each value or to dqkv's RMS, 0.19; measured), so 2.5e-2 here.
  ExpectNear(Widen(bdqkv), ToVector<float>(fdqkv), 2.5e-2, "dqkv");
  // And every value is a bf16 one, written (the 5s it held are gone).
  int unwritten = 0;
  for (const float x : Widen(bdqkv)) unwritten += x == 5.0f;
  EXPECT_EQ(unwritten, 0);
}

}  // namespace
}  // namespace tessel::kernel_test

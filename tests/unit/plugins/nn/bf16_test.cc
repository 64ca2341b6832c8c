// The bf16 kernels of libtessel_nn.so (nn.cast, nn.add, nn.linear, nn.gelu_tanh, nn.softmax_xent) against
// their own f32 kernels: a bf16 kernel reads its bf16 inputs exactly (as f32), computes in f32 and rounds
// each stored result once, so it must give exactly round_bf16(f32 kernel on the widened inputs), and its
// f32 outputs (A: dW, db, the loss) exactly the f32 kernel's or, where the bf16 path sums in another
// memory layout, within a float rounding. What "round" means is checked on its own against hand-picked
// values (nearest, ties to even, NaN kept).
#include <gtest/gtest.h>
#include <tessel/bf16.h>
#include <tessel/ops/nn.h>

#include <cmath>
#include <limits>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {
namespace {

TEST(Bf16Rounding, IsToNearestTiesToEvenAndKeepsNaN) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1). 1 + 3 x 2^-8 lies
  // halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6. Just above a tie rounds up.
  EXPECT_EQ(RoundToBf16(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(RoundToBf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  EXPECT_EQ(RoundToBf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_EQ(RoundToBf16(-2.5f), -2.5f);
  EXPECT_TRUE(std::isnan(RoundToBf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(RoundToBf16(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(RoundToBf16(3.4e38f), std::numeric_limits<float>::infinity()) << "past bf16's largest finite value";
}

TEST(Bf16Kernels, CastRoundsF32ToBf16AndCopiesF32) {
  ThreadPool pool(2);
  std::vector<float> x = RandomValues<float>(70001, 1, -3, 3);
  x[0] = 1.0f + 0x1p-8f, x[1] = std::numeric_limits<float>::quiet_NaN();
  Tensor tx = MakeTensor<float>({70001}, x), ty = Filled<float>({70001}, 0.0f);
  Tensor tb = Bf16Tensor({70001}, std::vector<float>(70001, 9.0f));
  CallCpu("nn.cast", {&tx}, {&tb}, &pool);
  ExpectSameBits(Widen(tb), Rounded(x), "cast to bf16");
  CallCpu("nn.cast", {&tx}, {&ty}, &pool);
  ExpectSameBits(ToVector<float>(ty), x, "cast to f32 (a copy)");
  // A is f32 for a bf16 T: an f64 source is refused.
  Tensor td = Filled<double>({70001}, 1.0);
  EXPECT_FALSE(TryCallCpu("nn.cast", {&td}, {&tb}, &pool).ok());
}

TEST(Bf16Kernels, AddIsTheRoundedF32Sum) {
  ThreadPool pool(2);
  const int64_t n = 50000;
  const std::vector<float> a = Bf16Representable(n, 2), b = Bf16Representable(n, 3);
  Tensor ta = Bf16Tensor({n}, a), tb = Bf16Tensor({n}, b), tc = Bf16Tensor({n}, std::vector<float>(n, 0));
  CallCpu("nn.add", {&ta, &tb}, {&tc}, &pool);
  Tensor fa = MakeTensor<float>({n}, a), fb = MakeTensor<float>({n}, b), fc = Filled<float>({n}, 0.0f);
  CallCpu("nn.add", {&fa, &fb}, {&fc}, &pool);
  ExpectSameBits(Widen(tc), Rounded(ToVector<float>(fc)), "C");
}

// Shapes that cross the kernels' blocks (256 rows, 64 output columns) and are not multiples of them.
TEST(Bf16Kernels, LinearIsTheRoundedF32LinearWithF32Gradients) {
  ThreadPool pool(2);
  const int64_t n = 300, k = 37, o = 70;
  const std::vector<float> x = Bf16Representable(n * k, 4), w = Bf16Representable(o * k, 5),
                           b = Bf16Representable(o, 6);
  const std::vector<float> dy = Bf16Representable(n * o, 7);
  // Forward.
  Tensor bx = Bf16Tensor({n, k}, x), bw = Bf16Tensor({o, k}, w), bb = Bf16Tensor({o}, b);
  Tensor by = Bf16Tensor({n, o}, std::vector<float>(n * o, 0));
  CallCpu("nn.linear.fwd", {&bx, &bw, &bb}, {&by}, &pool);
  Tensor fx = MakeTensor<float>({n, k}, x), fw = MakeTensor<float>({o, k}, w), fb = MakeTensor<float>({o}, b);
  Tensor fy = Filled<float>({n, o}, 0.0f);
  CallCpu("nn.linear.fwd", {&fx, &fw, &fb}, {&fy}, &pool);
  ExpectSameBits(Widen(by), Rounded(ToVector<float>(fy)), "Y");
  // Backward: dX rounded, dW and db accumulated in f32 onto what they held.
  Tensor bdy = Bf16Tensor({n, o}, dy), fdy = MakeTensor<float>({n, o}, dy);
  Tensor bdx = Bf16Tensor({n, k}, std::vector<float>(n * k, 0)), fdx = Filled<float>({n, k}, 0.0f);
  const std::vector<float> dw0 = RandomValues<float>(o * k, 8), db0 = RandomValues<float>(o, 9);
  Tensor bdw = MakeTensor<float>({o, k}, dw0), bdb = MakeTensor<float>({o}, db0);
  Tensor fdw = MakeTensor<float>({o, k}, dw0), fdb = MakeTensor<float>({o}, db0);
  CallCpu("nn.linear.bwd", {&bdy, &bx, &bw}, {&bdx, &bdw, &bdb}, &pool);
  CallCpu("nn.linear.bwd", {&fdy, &fx, &fw}, {&fdx, &fdw, &fdb}, &pool);
  ExpectSameBits(Widen(bdx), Rounded(ToVector<float>(fdx)), "dX");
  ExpectNear(ToVector<float>(bdw), ToVector<float>(fdw), 1e-6, "dW");
  ExpectSameBits(ToVector<float>(bdb), ToVector<float>(fdb), "db");
  // A bf16 dW is refused: parameter gradients are A (f32).
  Tensor wrong = Bf16Tensor({o, k}, std::vector<float>(o * k, 0));
  EXPECT_FALSE(TryCallCpu("nn.linear.bwd", {&bdy, &bx, &bw}, {&bdx, &wrong, &bdb}, &pool).ok());
  // db with 0 rows: skipped (the tied head); dW still accumulates.
  Tensor none = Tensor::Borrow(nullptr, DType::kF32, {0});
  Tensor dw2 = MakeTensor<float>({o, k}, dw0);
  CallCpu("nn.linear.bwd", {&bdy, &bx, &bw}, {&bdx, &dw2, &none}, &pool);
  ExpectNear(ToVector<float>(dw2), ToVector<float>(fdw), 1e-6, "dW without db");
}

TEST(Bf16Kernels, GeluTanhIsTheRoundedF32Gelu) {
  ThreadPool pool(2);
  const int64_t n = 3, d = 9001;
  const std::vector<float> x = Bf16Representable(n * d, 10, -4, 4), dy = Bf16Representable(n * d, 11);
  Tensor bx = Bf16Tensor({n, d}, x), by = Bf16Tensor({n, d}, std::vector<float>(n * d, 0));
  Tensor fx = MakeTensor<float>({n, d}, x), fy = Filled<float>({n, d}, 0.0f);
  CallCpu("nn.gelu_tanh.fwd", {&bx}, {&by}, &pool);
  CallCpu("nn.gelu_tanh.fwd", {&fx}, {&fy}, &pool);
  ExpectSameBits(Widen(by), Rounded(ToVector<float>(fy)), "Y");
  Tensor bdy = Bf16Tensor({n, d}, dy), bdx = Bf16Tensor({n, d}, std::vector<float>(n * d, 0));
  Tensor fdy = MakeTensor<float>({n, d}, dy), fdx = Filled<float>({n, d}, 0.0f);
  CallCpu("nn.gelu_tanh.bwd", {&bdy, &bx}, {&bdx}, &pool);
  CallCpu("nn.gelu_tanh.bwd", {&fdy, &fx}, {&fdx}, &pool);
  ExpectSameBits(Widen(bdx), Rounded(ToVector<float>(fdx)), "dX");
}

// The fused classifier's form under bf16: the gradient written over the bf16 logits.
TEST(Bf16Kernels, SoftmaxXentInPlaceIsTheRoundedF32Gradient) {
  ThreadPool pool(2);
  const int64_t n = 40, c = 1001;
  const std::vector<float> z = Bf16Representable(n * c, 12, -6, 6);
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = (i * 37) % c;
  const std::vector<uint8_t> mask(n, 1);
  Tensor tlab = MakeTensor<int64_t>({n}, labels), tmask = MakeTensor<uint8_t>({n}, mask);
  const tessel_softmax_xent_params params{sizeof(tessel_softmax_xent_params), 1.0 / n};
  Tensor bz = Bf16Tensor({n, c}, z), bloss = Filled<double>({1}, 0.0), bhits = Filled<int64_t>({1}, 0);
  CallCpuWith("nn.softmax_xent.fwd_bwd", {&bz, &tlab, &tmask}, {&bloss, &bhits, &bz}, params, &pool);
  Tensor fz = MakeTensor<float>({n, c}, z), fdz = Filled<float>({n, c}, 0.0f);
  Tensor floss = Filled<double>({1}, 0.0), fhits = Filled<int64_t>({1}, 0);
  CallCpuWith("nn.softmax_xent.fwd_bwd", {&fz, &tlab, &tmask}, {&floss, &fhits, &fdz}, params, &pool);
  EXPECT_EQ(bloss.data<double>()[0], floss.data<double>()[0]) << "the loss is f64 from the same values";
  EXPECT_EQ(bhits.data<int64_t>()[0], fhits.data<int64_t>()[0]);
  ExpectSameBits(Widen(bz), Rounded(ToVector<float>(fdz)), "dlogits");
}

}  // namespace
}  // namespace tessel::kernel_test

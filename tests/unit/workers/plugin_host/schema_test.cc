// Schema parsing and the per-call shape check.
#include "workers/plugin_host/schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessel::workers {
namespace {

using ::testing::HasSubstr;

TEST(KernelSchema, ParsesArgumentsDimsAndTypes) {
  Result<Schema> s = ParseSchema("a.b.c(X:T[M,K], p:i64[R+1], s:f64[1], z:u8[]) -> (Y:f32[M, 4])");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->op, "a.b.c");
  ASSERT_EQ(s->inputs.size(), 4u);
  EXPECT_EQ(s->inputs[1].name, "p");
  EXPECT_EQ(s->inputs[1].type, SchemaType::kI64);
  ASSERT_EQ(s->inputs[1].dims.size(), 1u);
  EXPECT_EQ(s->inputs[1].dims[0].symbol, "R");
  EXPECT_EQ(s->inputs[1].dims[0].value, 1);
  EXPECT_TRUE(s->inputs[3].dims.empty());
  EXPECT_EQ(s->outputs[0].dims[1].value, 4);
  EXPECT_EQ(s->ToString(), "a.b.c(X:T[M,K], p:i64[R+1], s:f64[1], z:u8[]) -> (Y:f32[M,4])");
}

TEST(KernelSchema, AllowsNoOutputs) {
  Result<Schema> s = ParseSchema("optim.adam.step(param:T[P], hyper:f64[7]) -> ()");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->outputs.empty());
}

TEST(KernelSchema, MalformedSchemasNameWhatWasExpected) {
  const std::pair<const char*, const char*> cases[] = {
      {"op(X:T[N]", "expected ')' or ','"},  // truncated (the parser accepts either; both are named)
      {"op(X:T[N]) (Y:T[N])", "'->'"},
      {"op(X:q32[N]) -> ()", "a type"},
      {"op(X:T[N,]) -> ()", "a dimension"},
      {"op(X:T[N]) -> (X:T[N])", "appears twice"},
      {"op(X:T[A,B,C,D,E,F,G,H,I]) -> ()", "at most 8"},
      {"(X:T[N]) -> ()", "an op name"},
      {"op(X:T[N]) -> () trailing", "end of schema"},
  };
  for (const auto& [text, expected] : cases) {
    Result<Schema> s = ParseSchema(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().code(), Code::kPlugin);
    if (std::string_view(expected).starts_with("expected ')'")) {
      EXPECT_THAT(s.status().message(), HasSubstr("expected ','")) << text;
    } else {
      EXPECT_THAT(s.status().message(), HasSubstr(expected)) << text;
    }
  }
}

// CheckCall's status (its value, the call's T, is checked where it matters).
Status CheckCallStatus(const Schema& schema, Device device, const std::vector<const Tensor*>& inputs,
                       const std::vector<Tensor*>& outputs, const std::vector<OutputRows>& output_rows) {
  return CheckCall(schema, device, inputs, outputs, output_rows).status();
}

class CheckCallTest : public ::testing::Test {
 protected:
  Schema schema_ = ParseSchema("t.op(X:T[N,D], ptr:i64[N+1], s:f64[1]) -> (Y:T[N,D])").value();
  std::vector<float> xf_ = std::vector<float>(6);
  std::vector<double> xd_ = std::vector<double>(6), s_ = {1};
  std::vector<int64_t> ptr_ = std::vector<int64_t>(4);
  Tensor x_ = Tensor::Borrow(xf_.data(), DType::kF32, {3, 2});
  Tensor ptr_t_ = Tensor::Borrow(ptr_.data(), DType::kI64, {4});
  Tensor s_t_ = Tensor::Borrow(s_.data(), DType::kF64, {1});
};

TEST_F(CheckCallTest, AcceptsConsistentShapes) {
  Tensor y = Tensor::Borrow(xf_.data(), DType::kF32, {3, 2});
  EXPECT_TRUE(CheckCallStatus(schema_, Device::kCpu, {&x_, &ptr_t_, &s_t_}, {&y}, {}).ok());
}

TEST_F(CheckCallTest, RejectsASymbolThatDisagrees) {
  Tensor ptr = Tensor::Borrow(ptr_.data(), DType::kI64, {3});  // N+1 = 3 but N = 3
  Tensor y = Tensor::Borrow(xf_.data(), DType::kF32, {3, 2});
  const Status st = CheckCallStatus(schema_, Device::kCpu, {&x_, &ptr, &s_t_}, {&y}, {});
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_THAT(st.message(), HasSubstr("input 'ptr'"));
  EXPECT_THAT(st.message(), HasSubstr("N=3 from 'X'"));
}

TEST_F(CheckCallTest, RejectsMixedFloatingDtypesAndWrongFixedTypes) {
  Tensor y = Tensor::Borrow(xd_.data(), DType::kF64, {3, 2});
  EXPECT_THAT(CheckCallStatus(schema_, Device::kCpu, {&x_, &ptr_t_, &s_t_}, {&y}, {}).message(), HasSubstr("T is f32"));
  Tensor s32 = Tensor::Borrow(xf_.data(), DType::kF32, {1});
  Tensor yf = Tensor::Borrow(xf_.data(), DType::kF32, {3, 2});
  EXPECT_THAT(CheckCallStatus(schema_, Device::kCpu, {&x_, &ptr_t_, &s32}, {&yf}, {}).message(),
              HasSubstr("input 's'"));
}

TEST_F(CheckCallTest, RejectsWrongCountsRanksAndDevices) {
  Tensor y = Tensor::Borrow(xf_.data(), DType::kF32, {3, 2});
  EXPECT_THAT(CheckCallStatus(schema_, Device::kCpu, {&x_, &ptr_t_}, {&y}, {}).message(), HasSubstr("takes 3 inputs"));
  Tensor flat = Tensor::Borrow(xf_.data(), DType::kF32, {6});
  EXPECT_THAT(CheckCallStatus(schema_, Device::kCpu, {&flat, &ptr_t_, &s_t_}, {&y}, {}).message(), HasSubstr("rank 1"));
  EXPECT_THAT(CheckCallStatus(schema_, Device::kCuda, {&x_, &ptr_t_, &s_t_}, {&y}, {}).message(),
              HasSubstr("is on cpu"));
  EXPECT_THAT(CheckCallStatus(schema_, Device::kCpu, {&x_, nullptr, &s_t_}, {&y}, {}).message(), HasSubstr("is null"));
}

TEST_F(CheckCallTest, AnOutputMarkedMayBeEmptyAcceptsZeroRows) {
  Tensor y0 = Tensor::Borrow(nullptr, DType::kF32, {0, 2});
  EXPECT_FALSE(CheckCallStatus(schema_, Device::kCpu, {&x_, &ptr_t_, &s_t_}, {&y0}, {}).ok());
  EXPECT_TRUE(CheckCallStatus(schema_, Device::kCpu, {&x_, &ptr_t_, &s_t_}, {&y0}, {OutputRows::kMayBeEmpty}).ok());
}

}  // namespace
}  // namespace tessel::workers

namespace tessel::workers {
namespace {

// A is T's accumulation type: f32 for f32 and bf16 calls, f64 for f64 ones; the call's T is returned.
TEST(CheckCallAccumulate, AFollowsT) {
  const Schema schema = ParseSchema("t.ln(X:T[N], w:T[N]) -> (Y:T[N], mean:A[N])").value();
  std::vector<uint16_t> h(4);
  std::vector<float> f(4), g(4);
  std::vector<double> d(4), e(4);
  Tensor xb = Tensor::Borrow(h.data(), DType::kBF16, {4}), xf = Tensor::Borrow(f.data(), DType::kF32, {4});
  Tensor af = Tensor::Borrow(g.data(), DType::kF32, {4}), xd = Tensor::Borrow(d.data(), DType::kF64, {4});
  Tensor ad = Tensor::Borrow(e.data(), DType::kF64, {4});
  auto bf16 = CheckCall(schema, Device::kCpu, {&xb, &xb}, {&xb, &af}, {});
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  EXPECT_EQ(**bf16, DType::kBF16);
  EXPECT_TRUE(CheckCall(schema, Device::kCpu, {&xf, &xf}, {&xf, &af}, {}).ok());
  EXPECT_TRUE(CheckCall(schema, Device::kCpu, {&xd, &xd}, {&xd, &ad}, {}).ok());
  const Status wrong = CheckCall(schema, Device::kCpu, {&xb, &xb}, {&xb, &ad}, {}).status();
  EXPECT_THAT(wrong.message(), HasSubstr("so A must be f32")) << wrong.ToString();
  EXPECT_FALSE(CheckCall(schema, Device::kCpu, {&xd, &xd}, {&xd, &af}, {}).ok());
  EXPECT_FALSE(CheckCall(schema, Device::kCpu, {&xf, &xf}, {&xf, &xb}, {}).ok()) << "A is never bf16";
}

}  // namespace
}  // namespace tessel::workers

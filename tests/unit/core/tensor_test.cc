#include "core/tensor.h"

#include <gtest/gtest.h>

namespace tessel {
namespace {

TEST(Tensor, ZerosHasShapeAndZeroedData) {
  auto t = Tensor::Zeros(DType::kF64, {3, 5});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->numel(), 15);
  EXPECT_EQ(t->nbytes(), 120u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(t->data<double>()[i], 0.0);
  EXPECT_EQ(t->DebugString(), "f64[3, 5] cpu");
}

TEST(Tensor, CopiesShareTheBuffer) {
  auto t = Tensor::Zeros(DType::kF32, {4});
  ASSERT_TRUE(t.ok());
  Tensor copy = *t;
  copy.data<float>()[2] = 7.f;
  EXPECT_EQ(t->data<float>()[2], 7.f);
}

TEST(Tensor, CudaAllocationFailsCleanlyWithoutGpu) {
  if (CudaAvailable()) GTEST_SKIP() << "a GPU is present";
  auto t = Tensor::Empty(DType::kF32, {4}, CudaAllocator());
  EXPECT_FALSE(t.ok());
}

}  // namespace
}  // namespace tessel

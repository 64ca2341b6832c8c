#include "core/tensor.h"

#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__)
// Under AddressSanitizer a request beyond its limit aborts unless malloc may return null, as the real
// allocator does: FailedAllocationIsOutOfMemoryNamingTheShape checks what Tessel does then.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

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

// Issue 32 row 11: a host allocation that fails is exit 6 naming the tensor's shape, never exit 1; a shape
// whose size overflows 64 bits is refused before any arithmetic wraps.
TEST(Tensor, FailedAllocationIsOutOfMemoryNamingTheShape) {
  auto t = Tensor::Empty(DType::kF32, {int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 10});  // 4 PiB
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kStorage) << t.status().message();
  EXPECT_EQ(t.status().message().rfind("a f32[1048576, 1048576, 1024] cpu tensor: out of memory: a host allocation of "
                                       "4503599627370496 bytes (4.5 PB) failed",
                                       0),
            0u)
      << t.status().message();
  auto huge = Tensor::Empty(DType::kF32, {int64_t{1} << 40, int64_t{1} << 40});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), Code::kStorage);
}

TEST(Tensor, CudaAllocationFailsCleanlyWithoutGpu) {
  if (CudaAvailable()) GTEST_SKIP() << "a GPU is present";
  auto t = Tensor::Empty(DType::kF32, {4}, CudaAllocator());
  EXPECT_FALSE(t.ok());
}

}  // namespace
}  // namespace tessel

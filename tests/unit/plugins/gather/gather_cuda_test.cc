// gather.rows on CUDA against the CPU gather: with the table in device memory (the generic cross-device
// comparison) and zero-copy, with the table in mapped page-locked host memory read through the device
// pointer cudaHostGetDevicePointer gives; and a bad id as bad data. Skipped, with the reason, when Tessel
// was built without CUDA or no GPU is visible.
#include <gtest/gtest.h>
#include <tessel/ops/gather.h>

#include <cstring>

#include "../kernel_test_util.h"

#if TESSEL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessel::kernel_test {
namespace {

std::vector<int64_t> Ids(int64_t m, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(static_cast<size_t>(m));
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
  return ids;
}

template <typename T>
class GatherCudaTest : public ::testing::Test {
 protected:
  void SetUp() override { RequireCudaKernels({"gather.rows"}); }
};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GatherCudaTest, FloatTypes);

// Widths that take the 16-byte path (whole 16-byte words) and the 4-byte one (odd widths).
TYPED_TEST(GatherCudaTest, DeviceTableMatchesCpu) {
  using T = TypeParam;
  for (int64_t d : {1, 3, 4, 17, 32, 33, 128, 130, 512}) {
    SCOPED_TRACE("d " + std::to_string(d));
    const int64_t n = 700, m = 2500;
    CompareDevices("gather.rows",
                   {MakeTensor<T>({n, d}, RandomValues<T>(n * d, 1)), MakeTensor<int64_t>({m}, Ids(m, n, 2))},
                   {Filled<T>({m, d}, T(3))}, 0.0);
  }
}

#if TESSEL_HAVE_CUDA
// Device memory for one test, freed with the object.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(ptr); }
};
// Mapped page-locked host memory, freed with the object.
struct PinnedBuffer {
  void* ptr = nullptr;
  explicit PinnedBuffer(size_t bytes) { EXPECT_EQ(cudaHostAlloc(&ptr, bytes, cudaHostAllocMapped), cudaSuccess); }
  ~PinnedBuffer() { cudaFreeHost(ptr); }
};
#endif

TYPED_TEST(GatherCudaTest, ZeroCopyFromPinnedHostTableMatchesCpu) {
#if TESSEL_HAVE_CUDA
  using T = TypeParam;
  ThreadPool pool(2);
  const workers::Kernel* cuda = BuiltinRegistry().Find("gather.rows", Device::kCuda).value();
  for (int64_t d : {3, 32, 33, 128, 512}) {
    SCOPED_TRACE("d " + std::to_string(d));
    const int64_t n = 5000, m = 7000;
    const std::vector<T> values = RandomValues<T>(n * d, 3);
    const std::vector<int64_t> ids = Ids(m, n, 4);
    PinnedBuffer table(values.size() * sizeof(T));
    std::memcpy(table.ptr, values.data(), values.size() * sizeof(T));
    void* table_on_device = nullptr;
    ASSERT_EQ(cudaHostGetDevicePointer(&table_on_device, table.ptr, 0), cudaSuccess);
    DeviceBuffer dids(ids.size() * sizeof(int64_t)), dy(static_cast<size_t>(m * d) * sizeof(T));
    ASSERT_EQ(cudaMemcpy(dids.ptr, ids.data(), ids.size() * sizeof(int64_t), cudaMemcpyHostToDevice), cudaSuccess);
    Tensor tt = Tensor::Borrow(table_on_device, DTypeOf<T>(), {n, d}, Device::kCuda);
    Tensor tids = Tensor::Borrow(dids.ptr, DType::kI64, {m}, Device::kCuda);
    Tensor ty = Tensor::Borrow(dy.ptr, DTypeOf<T>(), {m, d}, Device::kCuda);
    const Status st = cuda->Call({&tt, &tids}, {&ty}, &pool);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    Tensor ht = MakeTensor<T>({n, d}, values), hids = MakeTensor<int64_t>({m}, ids), hy = Filled<T>({m, d}, T(0));
    CallCpu("gather.rows", {&ht, &hids}, {&hy}, &pool);
    std::vector<T> from_gpu(static_cast<size_t>(m * d));
    ASSERT_EQ(cudaMemcpy(from_gpu.data(), dy.ptr, from_gpu.size() * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(from_gpu.data(), hy.data<T>(), from_gpu.size() * sizeof(T)), 0);
  }
#else
  GTEST_SKIP() << "Tessel was built without CUDA";
#endif
}

TYPED_TEST(GatherCudaTest, IdOutOfRangeIsBadData) {
#if TESSEL_HAVE_CUDA
  using T = TypeParam;
  const workers::Kernel* cuda = BuiltinRegistry().Find("gather.rows", Device::kCuda).value();
  const int64_t n = 6, d = 5;
  const std::vector<int64_t> ids = {0, 5, 1, 6, 2, -3};
  DeviceBuffer dt(n * d * sizeof(T)), dids(ids.size() * sizeof(int64_t)), dy(ids.size() * d * sizeof(T));
  ASSERT_EQ(cudaMemset(dt.ptr, 0, n * d * sizeof(T)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dids.ptr, ids.data(), ids.size() * sizeof(int64_t), cudaMemcpyHostToDevice), cudaSuccess);
  Tensor tt = Tensor::Borrow(dt.ptr, DTypeOf<T>(), {n, d}, Device::kCuda);
  Tensor tids = Tensor::Borrow(dids.ptr, DType::kI64, {static_cast<int64_t>(ids.size())}, Device::kCuda);
  Tensor ty = Tensor::Borrow(dy.ptr, DTypeOf<T>(), {static_cast<int64_t>(ids.size()), d}, Device::kCuda);
  const Status st = cuda->Call({&tt, &tids}, {&ty}, nullptr);
  EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
  EXPECT_NE(st.message().find("ids[3] = 6 is out of range [0, 6)"), std::string::npos) << st.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "a bad id must not leave a sticky CUDA error";
#else
  GTEST_SKIP() << "Tessel was built without CUDA";
#endif
}

}  // namespace
}  // namespace tessel::kernel_test

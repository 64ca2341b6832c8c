// The offload policy's buffers (workers/llm/spill_pool.*) over a spill store with an in-memory file or a
// fault-injecting one: what Get hands back is always the block's own bytes, or nullptr (recompute), never
// someone else's or stale ones.
#include "workers/llm/spill_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/cuda_device.h"

#if TESSEL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessel::workers {
namespace {

constexpr int64_t kFloats = 3000;  // rounded up to whole pages by the pool

std::unique_ptr<storage::SpillStore> Store(storage::SpillFault fault = storage::SpillFault::kNone) {
  std::unique_ptr<storage::SpillFile> file = storage::NewMemorySpillFile();
  if (fault != storage::SpillFault::kNone) file = storage::NewFaultySpillFile(std::move(file), {fault, 1, true});
  return storage::SpillStore::WithFile(std::move(file), {"mem", "spill_pool_test", false, 0});
}

void Fill(float* p, int64_t id) {
  for (int64_t i = 0; i < kFloats; ++i) p[i] = static_cast<float>(id * 100000 + i);
}
bool Holds(const float* p, int64_t id) {
  for (int64_t i = 0; i < kFloats; ++i) {
    if (p[i] != static_cast<float>(id * 100000 + i)) return false;
  }
  return true;
}

// Forward of blocks 0..n-1 into the pool, then their backward from the last, prefetching ahead: the
// pattern a one-stage GPT step follows. Returns how many blocks came back as nullptr.
int RunStep(SpillPool& pool, int n, int64_t first_id = 0) {
  for (int64_t id = first_id; id < first_id + n; ++id) {
    Result<float*> buffer = pool.Acquire(id);
    EXPECT_TRUE(buffer.ok()) << buffer.status().ToString();
    if (!buffer.ok()) return -1;
    Fill(*buffer, id);
    EXPECT_TRUE(pool.Offload(id).ok());
  }
  int recompute = 0;
  for (int64_t id = first_id + n - 1; id >= first_id; --id) {
    for (int64_t ahead = id - 1; ahead >= first_id && ahead > id - pool.buffers(); --ahead) {
      EXPECT_TRUE(pool.Prefetch(ahead).ok());
    }
    Result<float*> back = pool.Get(id);
    EXPECT_TRUE(back.ok()) << back.status().ToString();
    if (!back.ok()) return -1;
    if (*back == nullptr) {
      ++recompute;
    } else {
      EXPECT_TRUE(Holds(*back, id)) << "block " << id << " came back with other bytes";
    }
    EXPECT_TRUE(pool.Release(id).ok());
  }
  return recompute;
}

TEST(SpillPool, BlocksComeBackFromTheStoreWhenBuffersRunOut) {
  auto store = Store();
  auto pool = SpillPool::Create(store.get(), kFloats, 2, DeviceContext{}, nullptr);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*pool)->bytes() % 4096, 0);  // whole pages
  for (int step = 0; step < 3; ++step) EXPECT_EQ(RunStep(**pool, 6), 0) << "step " << step;
  const SpillPoolCounters& c = (*pool)->counters();
  EXPECT_EQ(c.offloaded, 18);
  EXPECT_EQ(c.fetched + c.cache_hits, 18);
  EXPECT_GE(c.fetched, 12) << "with 2 buffers most blocks must come back from the store";
  EXPECT_EQ(store->stats().read_bytes, c.fetched * (*pool)->bytes());
}

TEST(SpillPool, ABufferStillHoldingItsBlockIsUsedWithoutARead) {
  auto store = Store();
  auto pool = SpillPool::Create(store.get(), kFloats, 4, DeviceContext{}, nullptr);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(RunStep(**pool, 3), 0);
  EXPECT_EQ((*pool)->counters().fetched, 0);
  EXPECT_EQ(store->stats().read_bytes, 0);
  // The next step rewrites the same blocks: last step's copies must not be mistaken for this step's.
  for (int64_t id = 0; id < 3; ++id) {
    Result<float*> buffer = (*pool)->Acquire(id);
    ASSERT_TRUE(buffer.ok());
    Fill(*buffer, id + 7);  // different bytes under the same id
    ASSERT_TRUE((*pool)->Offload(id).ok());
  }
  for (int64_t id = 2; id >= 0; --id) {
    Result<float*> back = (*pool)->Get(id);
    ASSERT_TRUE(back.ok());
    ASSERT_NE(*back, nullptr);
    EXPECT_TRUE(Holds(*back, id + 7)) << "block " << id << " came back with last step's bytes";
    EXPECT_TRUE((*pool)->Release(id).ok());
  }
}

TEST(SpillPool, AFullDiskTurnsSpillingOffAndBlocksAreRecomputed) {
  auto store = Store(storage::SpillFault::kNoSpace);
  auto pool = SpillPool::Create(store.get(), kFloats, 2, DeviceContext{}, nullptr);
  ASSERT_TRUE(pool.ok());
  const int recomputed = RunStep(**pool, 6);
  EXPECT_GT(recomputed, 0);
  EXPECT_FALSE((*pool)->spilling());
  EXPECT_GE((*pool)->counters().no_space_fallbacks, 1);
  EXPECT_EQ((*pool)->counters().recomputed, recomputed);
  // The run goes on without the disk.
  EXPECT_EQ(RunStep(**pool, 6), 6 - 2) << "with spilling off only the blocks still in the 2 buffers come back";
}

TEST(SpillPool, AReadThatFailsItsChecksumIsRecomputedNotUsed) {
  auto store = Store(storage::SpillFault::kCorruptRead);
  auto pool = SpillPool::Create(store.get(), kFloats, 2, DeviceContext{}, nullptr);
  ASSERT_TRUE(pool.ok());
  EXPECT_GT(RunStep(**pool, 6), 0);  // every read is corrupt: each block read back is recomputed
  EXPECT_GT((*pool)->counters().checksum_fallbacks, 0);
  EXPECT_TRUE((*pool)->spilling()) << "a bad read does not stop spilling";
}

TEST(SpillPool, AnyOtherIoErrorIsReturned) {
  auto store = Store(storage::SpillFault::kIoError);
  auto pool = SpillPool::Create(store.get(), kFloats, 2, DeviceContext{}, nullptr);
  ASSERT_TRUE(pool.ok());
  Status first_error;
  for (int64_t id = 0; id < 4 && first_error.ok(); ++id) {
    Result<float*> buffer = (*pool)->Acquire(id);
    if (!buffer.ok()) {
      first_error = buffer.status();
      break;
    }
    first_error = (*pool)->Offload(id);
  }
  if (first_error.ok()) {
    Result<float*> back = (*pool)->Get(0);
    first_error = back.ok() ? Status() : back.status();
  }
  ASSERT_FALSE(first_error.ok());
  EXPECT_EQ(first_error.code(), Code::kStorage);
  EXPECT_FALSE(storage::IsNoSpace(first_error));
}

// On a GPU the buffers live in device memory and go through pinned twins on the pool's own stream. The
// executor's stream here is a non-blocking one of its own (as a worker's is), so nothing but the pool's
// events orders the copies against it. Each block is filled by an asynchronous copy queued behind a 20 ms
// host-side delay on that stream, and Offload is called at once: a copy out that did not wait for the
// executor's stream would write the buffer's old bytes. Each block read back is checked by a copy on the
// executor's stream queued right after Get: one that did not wait for the copy in would see stale bytes.
// 8 MiB blocks, two buffers for six, three steps, so blocks go out and come back through the file.
#if TESSEL_HAVE_CUDA
TEST(SpillPool, GpuBlocksGoThroughPinnedTwinsOnThePoolsOwnStream) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device is visible: the GPU offload path needs a GPU";
  constexpr int64_t kBig = int64_t{2} << 20;  // floats: 8 MiB
  Result<CudaStream> stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto* exec = static_cast<cudaStream_t>(stream->get());
  const DeviceContext device{Device::kCuda, 0, stream->get(), &CudaAllocator()};
  auto store = Store();
  auto pool = SpillPool::Create(store.get(), kBig, 2, device, nullptr);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  const size_t bytes = kBig * sizeof(float);
  float* pinned = nullptr;  // one pinned source a block, and one to check into
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 7 * bytes), cudaSuccess);
  const auto value = [](int64_t id, int step, int64_t i) {
    return static_cast<float>((id + 7 * step) * 1000003 + i % 999983);
  };
  const auto delay = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  for (int step = 0; step < 3; ++step) {
    for (int64_t id = 0; id < 6; ++id) {
      float* src = pinned + id * kBig;
      for (int64_t i = 0; i < kBig; ++i) src[i] = value(id, step, i);
      Result<float*> buffer = (*pool)->Acquire(id);
      ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
      ASSERT_EQ(cudaLaunchHostFunc(exec, delay, nullptr), cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(*buffer, src, bytes, cudaMemcpyHostToDevice, exec), cudaSuccess);
      ASSERT_TRUE((*pool)->Offload(id).ok());
    }
    float* check = pinned + 6 * kBig;
    for (int64_t id = 5; id >= 0; --id) {
      if (id > 0) {
        ASSERT_TRUE((*pool)->Prefetch(id - 1).ok());
      }
      Result<float*> back = (*pool)->Get(id);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      ASSERT_NE(*back, nullptr);
      std::fill(check, check + kBig, -1.0f);
      ASSERT_EQ(cudaMemcpyAsync(check, *back, bytes, cudaMemcpyDeviceToHost, exec), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(exec), cudaSuccess);
      int64_t wrong = 0;
      for (int64_t i = 0; i < kBig; ++i) wrong += check[i] != value(id, step, i);
      EXPECT_EQ(wrong, 0) << "step " << step << ", block " << id << ": floats that are not the block's own";
      ASSERT_TRUE((*pool)->Release(id).ok());
    }
  }
  EXPECT_GE((*pool)->counters().fetched, 12) << "most blocks must have come back through the file";
  pool->reset();
  cudaFreeHost(pinned);
}
#endif

}  // namespace
}  // namespace tessel::workers

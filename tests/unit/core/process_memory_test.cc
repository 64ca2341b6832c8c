#include "core/process_memory.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>

namespace tessel {
namespace {

TEST(ProcessMemory, ResidentBytesFollowsPagesTouchedAndReleased) {
  const int64_t before = ResidentBytes();
  ASSERT_GT(before, 0);
  constexpr size_t kBytes = size_t{64} << 20;
  // mmap, not new: an allocator (ASan's quarantine) may keep freed pages resident.
  void* block = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(block, MAP_FAILED);
  EXPECT_LT(ResidentBytes() - before, static_cast<int64_t>(kBytes) / 10) << "mapped but untouched pages count";
  std::memset(block, 1, kBytes);
  const int64_t touched = ResidentBytes();
  EXPECT_GE(touched - before, static_cast<int64_t>(kBytes) * 9 / 10);
  // The kernel syncs its peak counter lazily, so the peak may lag the last few pages.
  EXPECT_GE(PeakResidentBytes(), before + static_cast<int64_t>(kBytes) * 9 / 10);
  munmap(block, kBytes);
  EXPECT_LT(ResidentBytes() - before, static_cast<int64_t>(kBytes) / 10);
}

}  // namespace
}  // namespace tessel

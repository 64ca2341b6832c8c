// The gather benchmark's inputs: large anonymous mappings, with or without transparent huge pages, as a
// feature store maps its table (a file mapping in the real thing; pages are what matters here), their
// contents, and the row ids.
// Ownership: a MappedBuffer owns its mapping and unmaps it on destruction. Thread safety: one owner;
// the memory itself may be used by any thread. Failure: Create returns a Status when mmap fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace tessel::bench {

enum class Pages {
  kHuge,   // madvise(MADV_HUGEPAGE): 2 MiB pages where the kernel can find them
  kSmall,  // madvise(MADV_NOHUGEPAGE): 4 KiB pages, whatever the system's THP setting
};

const char* PagesName(Pages pages);  // "huge", "4k"

class MappedBuffer {
 public:
  static Result<MappedBuffer> Create(size_t bytes, Pages pages);
  MappedBuffer() = default;
  ~MappedBuffer();
  MappedBuffer(MappedBuffer&& other) noexcept;
  MappedBuffer& operator=(MappedBuffer&& other) noexcept;
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }
  Pages pages() const { return pages_; }

  // The share of the mapping backed by huge pages now (AnonHugePages of /proc/self/smaps), or -1 when
  // it cannot be read. Meaningful after the pages were touched.
  double HugePageFraction() const;

 private:
  char* base_ = nullptr;  // the whole mapping: guard pages and alignment slack included
  size_t mapped_ = 0;
  char* data_ = nullptr;
  size_t size_ = 0;
  Pages pages_ = Pages::kSmall;
};

// M ids drawn uniformly from [0, n) by a seeded generator (the same ids for the same arguments).
std::vector<int64_t> UniformIds(int64_t m, int64_t n, uint64_t seed);

// Whether out[i] holds table row ids[i] (row_bytes bytes) for `samples` positions spread over [0, m),
// the first and the last included. Returns the first position that does not, or -1.
int64_t FirstWrongRow(const char* table, int64_t row_bytes, const int64_t* ids, int64_t m, const char* out,
                      int samples = 4096);

}  // namespace tessel::bench

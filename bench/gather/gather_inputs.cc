#include "gather_inputs.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>

namespace tessel::bench {

const char* PagesName(Pages pages) { return pages == Pages::kHuge ? "huge" : "4k"; }

namespace {

// An inaccessible page on each side keeps the kernel from merging the mapping with a neighbour of the
// same flags, so that /proc/self/smaps reports it on its own; the data starts on a huge-page boundary.
constexpr size_t kGuard = 4096;
constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

Result<MappedBuffer> MappedBuffer::Create(size_t bytes, Pages pages) {
  bytes = (bytes + kGuard - 1) / kGuard * kGuard;
  const size_t mapped = bytes + kHugePage + 2 * kGuard;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return InternalError("mmap of " + std::to_string(bytes) + " bytes failed: " + std::strerror(errno));
  }
  MappedBuffer buffer;
  buffer.base_ = static_cast<char*>(p);
  buffer.mapped_ = mapped;
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) + kGuard;
  buffer.data_ = reinterpret_cast<char*>((first + kHugePage - 1) / kHugePage * kHugePage);
  buffer.size_ = bytes;
  buffer.pages_ = pages;
  mprotect(buffer.data_ - kGuard, kGuard, PROT_NONE);
  mprotect(buffer.data_ + bytes, kGuard, PROT_NONE);
  // Advice only: a kernel without THP ignores it, and HugePageFraction says what came of it.
  madvise(buffer.data_, bytes, pages == Pages::kHuge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  return buffer;
}

MappedBuffer::~MappedBuffer() {
  if (base_ != nullptr) munmap(base_, mapped_);
}

MappedBuffer::MappedBuffer(MappedBuffer&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      mapped_(std::exchange(other.mapped_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      pages_(other.pages_) {}

MappedBuffer& MappedBuffer::operator=(MappedBuffer&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, mapped_);
    base_ = std::exchange(other.base_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    pages_ = other.pages_;
  }
  return *this;
}

double MappedBuffer::HugePageFraction() const {
  // /proc/self/smaps lists each mapping as "start-end perms ..." followed by "Key: value kB" lines; the
  // kernel may have split ours into several mappings (huge and not), so sum over every one inside it.
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps || size_ == 0) return -1;
  const auto begin = reinterpret_cast<uintptr_t>(data_), end = begin + size_;
  bool inside = false, found = false;
  uint64_t huge_kb = 0;
  for (std::string line; std::getline(smaps, line);) {
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        line.find_first_not_of("0123456789abcdef") == dash) {
      const uintptr_t lo = std::strtoull(line.substr(0, dash).c_str(), nullptr, 16);
      const uintptr_t hi = std::strtoull(line.substr(dash + 1, space - dash - 1).c_str(), nullptr, 16);
      inside = lo >= begin && hi <= end;
      found = found || inside;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      std::istringstream value(line.substr(14));
      uint64_t kb = 0;
      value >> kb;
      huge_kb += kb;
    }
  }
  if (!found) return -1;
  return static_cast<double>(huge_kb) * 1024.0 / static_cast<double>(size_);
}

std::vector<int64_t> UniformIds(int64_t m, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, n - 1);
  std::vector<int64_t> ids(static_cast<size_t>(m));
  for (int64_t& id : ids) id = dist(rng);
  return ids;
}

int64_t FirstWrongRow(const char* table, int64_t row_bytes, const int64_t* ids, int64_t m, const char* out,
                      int samples) {
  if (m <= 0) return -1;
  const int64_t step = std::max<int64_t>(1, m / samples);
  auto wrong = [&](int64_t i) {
    return std::memcmp(out + i * row_bytes, table + ids[i] * row_bytes, static_cast<size_t>(row_bytes)) != 0;
  };
  for (int64_t i = 0; i < m; i += step) {
    if (wrong(i)) return i;
  }
  return wrong(m - 1) ? m - 1 : -1;
}

}  // namespace tessel::bench

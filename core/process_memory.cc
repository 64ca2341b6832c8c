#include "core/process_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <initializer_list>

namespace tessel {

int64_t ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  const long page = sysconf(_SC_PAGESIZE);
  if (got != 2 || page <= 0) return 0;
  return static_cast<int64_t>(resident) * page;
}

namespace {

// The first number in `path` ("max" and a missing file: 0).
int64_t ReadLimit(const char* path) {
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  long long value = 0;
  const int got = std::fscanf(f, "%lld", &value);
  std::fclose(f);
  return got == 1 && value > 0 ? static_cast<int64_t>(value) : 0;
}

}  // namespace

int64_t HostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  // The limit of the cgroup mounted at the usual places (inside a container: its own).
  for (const char* limit : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t cap = ReadLimit(limit);
    if (cap > 0 && (bytes == 0 || cap < bytes)) bytes = cap;
  }
  return bytes;
}

int64_t PeakResidentBytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

}  // namespace tessel

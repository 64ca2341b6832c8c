// Cache discovery and per-level bandwidth for tessel-bench-limits (memory_levels.h).
//
// The read and update loops are cloned per ISA (x86-64-v4, -v3, baseline) as Tessel's own CPU kernels
// are (plugins/common/row_ops.cc): a limit measured with 16-byte vectors would sit below what an AVX2
// kernel of Tessel's gets from L1 and L2, and a floor built on it would not be one. No multiversioning
// under the sanitizers (ifunc resolvers run before their runtime is up).
#include "memory_levels.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <thread>

#if defined(__x86_64__) && !defined(TESSEL_NO_MULTIVERSION)
#define TESSEL_BW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TESSEL_BW_CLONES
#endif

namespace tessel::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kAlign = 4096;

// Sums the buffer as u64 words into 16 independent accumulators, which the vectoriser packs into four
// ymm registers (eight xmm in the baseline clone): loads, not adds, are the limit.
TESSEL_BW_CLONES uint64_t ReadSum(const char* p, size_t bytes) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  const size_t n = bytes / sizeof(uint64_t) / 16 * 16;
  uint64_t acc[16] = {};
  for (size_t i = 0; i < n; i += 16) {
    for (int k = 0; k < 16; ++k) acc[k] += w[i + static_cast<size_t>(k)];
  }
  uint64_t s = 0;
  for (int k = 0; k < 16; ++k) s += acc[k];
  return s;
}

// x = 0.999 x + 0.001 over n floats, in place.
TESSEL_BW_CLONES void Update(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * 0.999f + 0.001f;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort: unpinned still measures
}

bool ReadLine(const std::string& path, std::string* out) {
  std::ifstream f(path);
  return static_cast<bool>(std::getline(f, *out));
}

// "32K", "32768K", "1M" -> bytes; 0 when unreadable.
size_t ParseSize(const std::string& s) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str()) return 0;
  switch (*end) {
    case 'K':
      return static_cast<size_t>(v) << 10;
    case 'M':
      return static_cast<size_t>(v) << 20;
    case 'G':
      return static_cast<size_t>(v) << 30;
    default:
      return static_cast<size_t>(v);
  }
}

KernelBandwidth Summarise(std::vector<double> gbps) {
  KernelBandwidth k;
  if (gbps.empty()) return k;
  std::sort(gbps.begin(), gbps.end());
  k.samples = static_cast<int>(gbps.size());
  k.best_gbps = gbps.back();
  k.median_gbps = gbps[gbps.size() / 2];
  return k;
}

}  // namespace

std::vector<CacheLevel> DiscoverCaches(int threads) {
  std::vector<int> cpus = AllowedCpus();
  if (cpus.empty()) cpus.push_back(0);
  if (static_cast<int>(cpus.size()) > threads) cpus.resize(static_cast<size_t>(threads));
  // level -> (name, size of one instance, the instances by their cpu lists)
  struct Seen {
    std::string name;
    size_t size = 0;
    std::set<std::string> instances;
  };
  std::map<int, Seen> levels;
  for (int cpu : cpus) {
    for (int index = 0;; ++index) {
      const std::string dir =
          "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache/index" + std::to_string(index) + "/";
      std::string level, type, size, shared;
      if (!ReadLine(dir + "level", &level)) break;
      if (!ReadLine(dir + "type", &type) || !ReadLine(dir + "size", &size)) continue;
      if (type != "Data" && type != "Unified") continue;
      if (!ReadLine(dir + "shared_cpu_list", &shared)) shared = "cpu" + std::to_string(cpu);
      const int l = std::atoi(level.c_str());
      Seen& seen = levels[l];
      seen.name = "L" + level + (type == "Data" ? "d" : "");
      seen.size = ParseSize(size);
      seen.instances.insert(shared);
    }
  }
  std::vector<CacheLevel> out;
  for (const auto& [l, seen] : levels) {
    if (seen.size == 0) continue;
    out.push_back({l, seen.name, seen.size * seen.instances.size(), static_cast<int>(seen.instances.size())});
  }
  return out;
}

LevelBandwidth MeasureLevel(const std::string& name, size_t capacity_bytes, size_t buffer_bytes, int threads,
                            size_t sample_bytes, int rounds, int samples) {
  const std::vector<int> cpus = AllowedCpus();
  // Each thread's slice: a whole number of pages, at least two (the copy uses one half as its source).
  const size_t slice = std::max<size_t>(2 * kAlign, buffer_bytes / static_cast<size_t>(threads) / kAlign * kAlign);
  const int passes = static_cast<int>(std::max<size_t>(1, sample_bytes / slice));
  LevelBandwidth result;
  result.name = name;
  result.capacity_bytes = capacity_bytes;
  result.buffer_bytes = slice * static_cast<size_t>(threads);
  result.passes = passes;
  enum { kRead, kCopy, kUpdate, kKernels };
  std::vector<std::vector<double>> gbps(kKernels);
  std::atomic<uint64_t> sink{0};
  std::atomic<bool> alloc_failed{false};
  for (int round = 0; round < rounds; ++round) {
    // seconds[(kernel * samples + sample) * threads + thread]
    std::vector<double> seconds(static_cast<size_t>(kKernels * samples * threads), 0.0);
    std::barrier sync(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        if (!cpus.empty()) PinTo(cpus[static_cast<size_t>(t) % cpus.size()]);
        std::unique_ptr<char, FreeDeleter> buf(static_cast<char*>(std::aligned_alloc(kAlign, slice)));
        if (!buf) alloc_failed = true;
        sync.arrive_and_wait();
        if (alloc_failed) return;  // every thread returns: none waits at a barrier again
        float* f = reinterpret_cast<float*>(buf.get());
        for (size_t i = 0; i < slice / sizeof(float); ++i) f[i] = 1.0f;
        uint64_t local = 0;
        const size_t half = slice / 2;
        for (int kernel = 0; kernel < kKernels; ++kernel) {
          auto pass = [&] {
            switch (kernel) {
              case kRead:
                local += ReadSum(buf.get(), slice);
                break;
              case kCopy:
                std::memcpy(buf.get() + half, buf.get(), half);
                break;
              default:
                Update(f, slice / sizeof(float));
                break;
            }
            // The passes read the same bytes each time: keep the compiler from merging them.
            asm volatile("" : : "r"(buf.get()) : "memory");
          };
          pass();  // brings the slice into the level
          for (int s = 0; s < samples; ++s) {
            sync.arrive_and_wait();
            const auto t0 = Clock::now();
            for (int p = 0; p < passes; ++p) pass();
            seconds[static_cast<size_t>((kernel * samples + s) * threads + t)] =
                std::chrono::duration<double>(Clock::now() - t0).count();
          }
        }
        local += static_cast<uint64_t>(f[slice / sizeof(float) / 2]);
        sink += local;
      });
    }
    for (auto& th : pool) th.join();
    if (alloc_failed) {
      std::fprintf(stderr, "tessel-bench-limits: cannot allocate %d x %zu bytes for %s\n", threads, slice,
                   name.c_str());
      std::exit(1);
    }
    for (int kernel = 0; kernel < kKernels; ++kernel) {
      // Bytes each kernel moves per pass and thread, counted as STREAM counts: read + written.
      // The copy reads one half of the slice into the other; the update reads and writes all of it.
      const double per_pass = static_cast<double>(kernel == kUpdate ? 2 * slice : slice);
      const double bytes = per_pass * passes * threads;
      for (int s = 0; s < samples; ++s) {
        const double* row = &seconds[static_cast<size_t>((kernel * samples + s) * threads)];
        const double slowest = *std::max_element(row, row + threads);
        if (slowest > 0) gbps[static_cast<size_t>(kernel)].push_back(bytes / slowest / 1e9);
      }
    }
  }
  if (sink.load() == 0) std::fprintf(stderr, "tessel-bench-limits: %s read check failed\n", name.c_str());
  result.read = Summarise(gbps[kRead]);
  result.copy = Summarise(gbps[kCopy]);
  result.update = Summarise(gbps[kUpdate]);
  return result;
}

}  // namespace tessel::bench

// The memory hierarchy's levels as tessel-bench-limits measures them: each cache level the benchmark's
// threads use (from sysfs) and DRAM, with the bandwidth of a read, a copy and an in-place update over a
// buffer that fits in that level (bench/README.md "Limits and fraction_of_limit").
#ifndef TESSEL_BENCH_LIMITS_MEMORY_LEVELS_H_
#define TESSEL_BENCH_LIMITS_MEMORY_LEVELS_H_

#include <cstddef>
#include <string>
#include <vector>

namespace tessel::bench {

// One level of data cache as the first `threads` allowed cpus see it.
struct CacheLevel {
  int level = 0;
  std::string name;           // "L1d", "L2", "L3", ...
  size_t capacity_bytes = 0;  // summed over the distinct instances those cpus use (two private L2s: twice one)
  int instances = 0;
};

// The data and unified caches of the first `threads` cpus this process may run on, innermost first, read
// from /sys/devices/system/cpu/cpuN/cache. Empty when sysfs does not describe them (the caller measures
// DRAM alone). Any thread may call it; it reads files and returns values the caller owns.
std::vector<CacheLevel> DiscoverCaches(int threads);

struct KernelBandwidth {
  int samples = 0;
  double best_gbps = 0;  // the fastest sample: what the level can do
  double median_gbps = 0;
};

struct LevelBandwidth {
  std::string name;           // a CacheLevel's, or "DRAM"
  size_t capacity_bytes = 0;  // 0 for DRAM (no limit)
  size_t buffer_bytes = 0;    // summed over the threads; half the capacity for a cache level
  int passes = 0;             // passes over each thread's slice per timed sample
  KernelBandwidth read;       // bytes read
  KernelBandwidth copy;       // memcpy: bytes read + bytes written
  KernelBandwidth update;     // x = 0.999 x + 0.001 in place: bytes read + bytes written
};

// Times the three kernels at `threads` threads, each pinned to its own allowed cpu (round-robin when there
// are fewer) with a slice of `buffer_bytes / threads` that it allocates and first-touches itself. Each
// sample starts all threads together at a barrier, runs enough passes over the slice to move
// `sample_bytes` per thread, and counts the slowest thread's time; `rounds` fresh allocations of
// `samples` samples per kernel. Call it from one thread at a time; it spawns and joins its own. Exits the
// process with status 1 when it cannot allocate.
LevelBandwidth MeasureLevel(const std::string& name, size_t capacity_bytes, size_t buffer_bytes, int threads,
                            size_t sample_bytes, int rounds, int samples);

}  // namespace tessel::bench

#endif  // TESSEL_BENCH_LIMITS_MEMORY_LEVELS_H_

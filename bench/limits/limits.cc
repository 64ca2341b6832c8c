// tessel-bench-limits: measures the limits bench/run.sh reports fraction_of_limit against, at the
// thread count of the benchmark (DESIGN.md "Benchmarks"):
//   - sgemm: OpenBLAS cblas_sgemm, square n x n x n, GFLOP/s (2 n^3 per call), best of the repetitions;
//   - stream copy: `threads` threads each memcpy one slice of a 256 MiB buffer (far larger than the
//     caches), GB/s counting bytes read plus bytes written (STREAM's convention for Copy): the best
//     repetition over 5 fresh allocations of 0.3 s each (2 of 0.15 s with --quick), and the median;
//   - stream update: the same buffer updated in place (x = 0.999 x + 0.001, read and written once), as
//     an optimizer step or any in-place elementwise kernel moves memory; same counting and repetitions.
//     glibc's memcpy uses non-temporal stores on a buffer this size, which this VM serves well below
//     what a read-modify-write loop gets, so the memory limit is the better of the two;
//   - levels: each data cache level the threads use (sysfs) and DRAM, with a read, a copy and an update
//     over a buffer that fits in the level (half its capacity; 256 MiB for DRAM), threads pinned
//     (memory_levels.h). A level's limit is its fastest kernel; DRAM's also counts the stream copy and
//     update. The RGNN floor charges each level the bytes that must pass through it (bench/README.md).
//
// Usage: tessel-bench-limits [--threads N] [--quick]
// Prints one JSON object on stdout. Exit 0 on success, 1 when a buffer cannot be allocated, 2 on a
// usage error. Single-threaded driver; the measurements spawn their own threads and join them.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "bench/common/bench_common.h"
#include "memory_levels.h"

namespace {

using tessel::bench::Clock;
using tessel::bench::SecondsSince;

struct Options {
  int threads = 2;
  bool quick = false;
};

struct GemmResult {
  int n = 0;
  int repetitions = 0;
  double best_gflops = 0;
};

// Times cblas_sgemm on n x n matrices until `min_seconds` have passed (and at least 3 calls), after one
// untimed warm-up call that lets OpenBLAS start its threads.
GemmResult MeasureSgemm(int n, double min_seconds) {
  const size_t count = static_cast<size_t>(n) * static_cast<size_t>(n);
  std::vector<float> a(count), b(count), c(count, 0.0f);
  for (size_t i = 0; i < count; ++i) {
    a[i] = static_cast<float>((i * 7 + 3) % 13) * 0.01f;
    b[i] = static_cast<float>((i * 5 + 1) % 11) * 0.01f;
  }
  auto call = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  };
  call();
  GemmResult result;
  result.n = n;
  const double flops = 2.0 * n * static_cast<double>(n) * n;
  const auto start = Clock::now();
  while (result.repetitions < 3 || SecondsSince(start) < min_seconds) {
    const auto t0 = Clock::now();
    call();
    result.best_gflops = std::max(result.best_gflops, flops / SecondsSince(t0) / 1e9);
    ++result.repetitions;
  }
  return result;
}

struct CopyResult {
  size_t bytes = 0;  // size of one buffer
  int rounds = 0;    // fresh buffer pairs
  int repetitions = 0;
  double best_gbps = 0;
  double median_gbps = 0;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// x = 0.999 x + 0.001 over n floats, in place (vectorised: the target builds with -O3).
void Update(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * 0.999f + 0.001f;
}

// One round: allocate src and dst, let each thread first-touch its own slices (so pages are placed as
// they are for the copy), then copy src -> dst in parallel until `seconds` have passed (at least 5
// times), then update dst in place as long. A repetition's time is that of the slowest thread; appends
// each repetition's GB/s to `copy_gbps` and `update_gbps`.
void CopyRound(size_t bytes, int threads, double seconds, std::vector<double>* copy_gbps,
               std::vector<double>* update_gbps) {
  constexpr size_t kAlign = 4096;
  std::unique_ptr<char, FreeDeleter> src(static_cast<char*>(std::aligned_alloc(kAlign, bytes)));
  std::unique_ptr<char, FreeDeleter> dst(static_cast<char*>(std::aligned_alloc(kAlign, bytes)));
  if (!src || !dst) {
    std::fprintf(stderr, "tessel-bench-limits: cannot allocate 2 x %zu bytes\n", bytes);
    std::exit(1);
  }
  const size_t slice = (bytes / static_cast<size_t>(threads) + kAlign - 1) / kAlign * kAlign;
  auto run_all = [&](auto&& body) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      const size_t begin = std::min(bytes, slice * static_cast<size_t>(t));
      const size_t end = std::min(bytes, begin + slice);
      pool.emplace_back([&body, begin, end] { body(begin, end); });
    }
    for (auto& th : pool) th.join();
  };
  run_all([&](size_t begin, size_t end) {
    std::memset(src.get() + begin, 1, end - begin);
    std::memset(dst.get() + begin, 0, end - begin);
  });
  const auto start = Clock::now();
  for (int r = 0; r < 5 || SecondsSince(start) < seconds; ++r) {
    const auto t0 = Clock::now();
    run_all([&](size_t begin, size_t end) { std::memcpy(dst.get() + begin, src.get() + begin, end - begin); });
    copy_gbps->push_back(2.0 * static_cast<double>(bytes) / SecondsSince(t0) / 1e9);
  }
  // Keeps the compiler from proving the copies dead.
  if (dst.get()[bytes / 2] != 1) std::fprintf(stderr, "tessel-bench-limits: copy check failed\n");
  // The in-place update, on dst as floats.
  const auto update_start = Clock::now();
  for (int r = 0; r < 5 || SecondsSince(update_start) < seconds; ++r) {
    const auto t0 = Clock::now();
    run_all([&](size_t begin, size_t end) { Update(reinterpret_cast<float*>(dst.get() + begin), (end - begin) / 4); });
    update_gbps->push_back(2.0 * static_cast<double>(bytes) / SecondsSince(t0) / 1e9);
  }
  float sum = 0;
  for (size_t i = 0; i < bytes / 4; i += 4096) sum += reinterpret_cast<const float*>(dst.get())[i];
  if (!(sum > 0)) std::fprintf(stderr, "tessel-bench-limits: update check failed\n");
}

// Several rounds with fresh buffers: on this VM the same copy runs at anywhere from about 40 to 70 GB/s
// depending on where its pages land, so one allocation can miss what the machine can do. The limit is
// the best repetition; the median is reported beside it.
CopyResult Summarise(std::vector<double> gbps, size_t bytes, int rounds) {
  std::sort(gbps.begin(), gbps.end());
  CopyResult result;
  result.bytes = bytes;
  result.rounds = rounds;
  result.repetitions = static_cast<int>(gbps.size());
  result.best_gbps = gbps.back();
  result.median_gbps = gbps[gbps.size() / 2];
  return result;
}

// {copy, update}
std::pair<CopyResult, CopyResult> MeasureMemory(size_t bytes, int threads, int rounds, double seconds_per_round) {
  bytes = (bytes + 4095) / 4096 * 4096;
  std::vector<double> copy, update;
  for (int i = 0; i < rounds; ++i) CopyRound(bytes, threads, seconds_per_round, &copy, &update);
  return {Summarise(copy, bytes, rounds), Summarise(update, bytes, rounds)};
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += ' ';
    } else {
      out += ch;
    }
  }
  return out;
}

int Usage(const char* why) {
  std::fprintf(stderr, "tessel-bench-limits: %s\nusage: tessel-bench-limits [--threads N] [--quick]\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--quick") {
      options.quick = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      options.threads = std::atoi(argv[++i]);
      if (options.threads < 1 || options.threads > 1024) return Usage("--threads must be 1 .. 1024");
    } else if (arg == "--help" || arg == "-h") {
      Usage("measures sgemm GFLOP/s, stream copy and update GB/s and each memory level's GB/s; prints JSON");
      return 0;
    } else {
      return Usage("unknown argument");
    }
  }
  openblas_set_num_threads(options.threads);
  const int n = options.quick ? 1024 : 2048;
  const GemmResult gemm = MeasureSgemm(n, options.quick ? 0.3 : 1.0);
  const auto [copy, update] =
      MeasureMemory(size_t{256} << 20, options.threads, options.quick ? 2 : 5, options.quick ? 0.15 : 0.3);
  std::vector<tessel::bench::LevelBandwidth> levels;
  const size_t level_sample = (options.quick ? size_t{64} : size_t{256}) << 20;  // per thread and sample
  for (const tessel::bench::CacheLevel& cache : tessel::bench::DiscoverCaches(options.threads)) {
    levels.push_back(tessel::bench::MeasureLevel(cache.name, cache.capacity_bytes, cache.capacity_bytes / 2,
                                                 options.threads, level_sample, options.quick ? 1 : 2,
                                                 options.quick ? 5 : 10));
  }
  levels.push_back(tessel::bench::MeasureLevel("DRAM", 0, size_t{256} << 20, options.threads, level_sample,
                                               options.quick ? 1 : 3, options.quick ? 3 : 5));
  std::printf(
      "{\"threads\": %d, \"quick\": %s,\n"
      " \"sgemm\": {\"n\": %d, \"repetitions\": %d, \"gflops\": %.2f, \"blas\": \"%s\"},\n"
      " \"stream_copy\": {\"buffer_bytes\": %zu, \"rounds\": %d, \"repetitions\": %d, \"gbps\": %.2f,"
      " \"median_gbps\": %.2f, \"counts\": \"read + write\"},\n"
      " \"stream_update\": {\"buffer_bytes\": %zu, \"rounds\": %d, \"repetitions\": %d, \"gbps\": %.2f,"
      " \"median_gbps\": %.2f, \"counts\": \"read + write\"},\n"
      " \"levels\": [",
      options.threads, options.quick ? "true" : "false", gemm.n, gemm.repetitions, gemm.best_gflops,
      JsonEscape(openblas_get_config()).c_str(), copy.bytes, copy.rounds, copy.repetitions, copy.best_gbps,
      copy.median_gbps, update.bytes, update.rounds, update.repetitions, update.best_gbps, update.median_gbps);
  for (size_t i = 0; i < levels.size(); ++i) {
    const tessel::bench::LevelBandwidth& l = levels[i];
    // The level's limit: its fastest kernel; for DRAM also the stream copy and update above.
    std::vector<std::pair<double, const char*>> kernels = {
        {l.read.best_gbps, "read"}, {l.copy.best_gbps, "copy"}, {l.update.best_gbps, "update"}};
    if (l.capacity_bytes == 0) {
      kernels.push_back({copy.best_gbps, "stream_copy"});
      kernels.push_back({update.best_gbps, "stream_update"});
    }
    const auto best = *std::max_element(kernels.begin(), kernels.end());
    auto kernel_json = [](const tessel::bench::KernelBandwidth& k) {
      char buf[128];
      std::snprintf(buf, sizeof(buf), "{\"gbps\": %.2f, \"median_gbps\": %.2f, \"samples\": %d}", k.best_gbps,
                    k.median_gbps, k.samples);
      return std::string(buf);
    };
    std::printf(
        "%s\n  {\"name\": \"%s\", \"capacity_bytes\": %zu, \"buffer_bytes\": %zu, \"passes\": %d, \"gbps\": %.2f,"
        " \"source\": \"%s\",\n   \"read\": %s, \"copy\": %s, \"update\": %s}",
        i ? "," : "", JsonEscape(l.name).c_str(), l.capacity_bytes, l.buffer_bytes, l.passes, best.first, best.second,
        kernel_json(l.read).c_str(), kernel_json(l.copy).c_str(), kernel_json(l.update).c_str());
  }
  std::printf("]}\n");
  return 0;
}

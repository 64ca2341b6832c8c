// tessel-bench-gather: the `gather` family of bench/run.sh (bench/gather/README.md). In one run, on one
// table of random float rows (2 GiB by default) and for each row size, it measures with the same thread
// pool:
//   - stream copy: memcpy of a contiguous buffer as large as one batch of rows, split like the gather
//     (the definition of tessel-bench-limits' stream_copy), and the same copy with non-temporal stores;
//   - naive: one loop over the rows, a memcpy per row;
//   - gather: gather.rows of libtessel_gather.so, loaded through the KernelRegistry as a worker loads it;
// each validated before it is timed, repeated round-robin (so that a change in the machine's load falls
// on every variant alike), medians reported. GB/s counts bytes read plus bytes written: a copy of B bytes
// moves 2B, and a gather of M rows of R bytes moves 2MR (the ids are not counted).
// The table is measured twice by default: with transparent huge pages and with 4 KiB pages.
// On a machine with a GPU it adds pinned host-to-device bandwidth and the zero-copy and staged gathers
// (gpu_gather.h).
//
// Usage: tessel-bench-gather [--threads N] [--quick] [--table-mib N] [--out-mib N] [--reps N]
//                            [--rows 128,256,...] [--pages huge|4k|both] [--seed S] [--json FILE]
//                            [--plugin FILE] [--commit ID] [--wait-idle S]
// Prints a table; writes JSON rows (default build/bench/results/gather.json). Exit 0 when every
// measurement ran, 1 when one failed (validation or a plugin error), 2 on a usage or setup error.
#include <tessel/ops/gather.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "bench/common/bench_common.h"
#include "bench/common/bench_json.h"
#include "core/json.h"
#include "core/logging.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "cpu_activity.h"
#include "gather_inputs.h"
#include "gpu_gather.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::bench {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// The acceptance point (bench/README.md): 512-byte rows, at least 80% of the stream copy and 1.25x the
// naive loop.
constexpr int64_t kTargetRowBytes = 512;
constexpr double kTargetOfStream = 0.80;
constexpr double kTargetOfNaive = 1.25;

struct Options {
  int threads = 2;
  bool quick = false;
  int64_t table_bytes = 2048 * kMiB;
  int64_t out_bytes = 256 * kMiB;
  int repetitions = 7;
  std::vector<int64_t> row_sizes = {128, 256, 512, 1024, 2048};
  std::vector<Pages> pages = {Pages::kHuge, Pages::kSmall};
  uint64_t seed = 1;
  std::string json = std::string(TESSEL_BINARY_DIR) + "/bench/results/gather.json";
  std::string plugin = std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_gather.so";
  std::string commit;
  double wait_idle = 0;  // before each row size, wait up to this many seconds for idle cores
};

// The split every variant uses: the gather kernel's (4 chunks per thread, taken by whichever thread is
// free), over rows of `unit` bytes.
int64_t Grain(int64_t unit) { return std::max<int64_t>(1, (int64_t{256} << 10) / unit); }

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) void CopyStreamingAvx512(char* dst, const char* src, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + b), _mm512_loadu_si512(src + b));
  }
  _mm_sfence();
}
void CopyStreamingSse2(char* dst, const char* src, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + b), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + b)));
  }
  _mm_sfence();
}
// dst 64-byte aligned; whole lines streamed, a tail of less than a line copied.
void CopyStreaming(char* dst, const char* src, int64_t bytes) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  const int64_t lines = bytes / 64 * 64;
  avx512 ? CopyStreamingAvx512(dst, src, lines) : CopyStreamingSse2(dst, src, lines);
  std::memcpy(dst + lines, src + lines, static_cast<size_t>(bytes - lines));
}
#else
void CopyStreaming(char* dst, const char* src, int64_t bytes) { std::memcpy(dst, src, static_cast<size_t>(bytes)); }
#endif

// The buffers and ids of one row size.
struct Case {
  int64_t row_bytes = 0;
  int64_t rows = 0;        // M
  int64_t table_rows = 0;  // N
  std::vector<int64_t> ids;
};

struct PagesResult {
  Pages pages = Pages::kHuge;
  double huge_fraction = -1;
  std::vector<double> naive, gather;  // GB/s per repetition
  std::string error;
};

struct CaseResult {
  int64_t row_bytes = 0, rows = 0, table_rows = 0;
  double busy_before = -1;  // the cores' busy fraction just before the case
  double others_busy = -1;  // the share of the cores other processes used while it ran
  double load_avg = -1;
  std::vector<double> stream, stream_nt;
  std::vector<PagesResult> by_pages;
};

class Bench {
 public:
  Bench(const Options& options, const workers::Kernel* gather, ThreadPool* pool)
      : options_(options), gather_(gather), pool_(pool) {}

  Status Allocate() {
    for (Pages pages : options_.pages) {
      TESSEL_ASSIGN_OR_RETURN(MappedBuffer table,
                              MappedBuffer::Create(static_cast<size_t>(options_.table_bytes), pages));
      FillTable(table);
      tables_.push_back(std::move(table));
    }
    TESSEL_ASSIGN_OR_RETURN(out_, MappedBuffer::Create(static_cast<size_t>(options_.out_bytes), Pages::kSmall));
    TESSEL_ASSIGN_OR_RETURN(src_, MappedBuffer::Create(static_cast<size_t>(options_.out_bytes), Pages::kSmall));
    ParallelBytes(options_.out_bytes, [&](int64_t b, int64_t e) {
      std::memset(out_.data() + b, 0, static_cast<size_t>(e - b));
      std::memset(src_.data() + b, 1, static_cast<size_t>(e - b));
    });
    return Status::Ok();
  }

  const std::vector<MappedBuffer>& tables() const { return tables_; }

  CaseResult Measure(int64_t row_bytes) {
    Case c;
    c.row_bytes = row_bytes;
    c.table_rows = options_.table_bytes / row_bytes;
    c.rows = options_.out_bytes / row_bytes;
    c.ids = UniformIds(c.rows, c.table_rows, options_.seed + static_cast<uint64_t>(row_bytes));
    CaseResult result;
    result.row_bytes = row_bytes;
    result.rows = c.rows;
    result.table_rows = c.table_rows;
    for (const MappedBuffer& table : tables_) {
      PagesResult p;
      p.pages = table.pages();
      p.huge_fraction = table.HugePageFraction();
      if (Status st = Validate(table, c); !st.ok()) p.error = st.ToString();
      result.by_pages.push_back(p);
    }
    const double moved = 2.0 * static_cast<double>(c.rows * row_bytes);
    for (int r = 0; r < options_.repetitions; ++r) {
      result.stream.push_back(moved / Timed([&] { StreamCopy(c.rows * row_bytes); }) / 1e9);
      result.stream_nt.push_back(moved / Timed([&] { StreamCopyNt(c.rows * row_bytes); }) / 1e9);
      for (size_t t = 0; t < tables_.size(); ++t) {
        PagesResult& p = result.by_pages[t];
        if (!p.error.empty()) continue;
        p.naive.push_back(moved / Timed([&] { NaiveGather(tables_[t], c); }) / 1e9);
        Status status;
        const double seconds = Timed([&] { status = PluginGather(tables_[t], c); });
        if (!status.ok()) {
          p.error = status.ToString();
          continue;
        }
        p.gather.push_back(moved / seconds / 1e9);
      }
    }
    return result;
  }

 private:
  template <typename F>
  void ParallelBytes(int64_t bytes, F&& fn) {
    const int64_t pages = (bytes + 4095) / 4096;
    pool_->ParallelFor(pages, Grain(4096), [&](int64_t p0, int64_t p1) { fn(p0 * 4096, std::min(bytes, p1 * 4096)); });
  }

  template <typename F>
  static double Timed(F&& fn) {
    const auto t0 = Clock::now();
    fn();
    return SecondsSince(t0);
  }

  // Every 4-byte word holds its own index, so that each row is distinct.
  void FillTable(MappedBuffer& table) {
    auto* words = reinterpret_cast<uint32_t*>(table.data());
    ParallelBytes(static_cast<int64_t>(table.size()), [&](int64_t b, int64_t e) {
      for (int64_t w = b / 4; w < e / 4; ++w) words[w] = static_cast<uint32_t>(w);
    });
  }

  void StreamCopy(int64_t bytes) {
    ParallelBytes(bytes, [&](int64_t b, int64_t e) {
      std::memcpy(out_.data() + b, src_.data() + b, static_cast<size_t>(e - b));
    });
  }

  void StreamCopyNt(int64_t bytes) {
    ParallelBytes(bytes, [&](int64_t b, int64_t e) { CopyStreaming(out_.data() + b, src_.data() + b, e - b); });
  }

  void NaiveGather(const MappedBuffer& table, const Case& c) {
    const int64_t rb = c.row_bytes;
    const char* t = table.data();
    char* out = out_.data();
    const int64_t* ids = c.ids.data();
    pool_->ParallelFor(c.rows, Grain(rb), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) std::memcpy(out + i * rb, t + ids[i] * rb, static_cast<size_t>(rb));
    });
  }

  Status PluginGather(const MappedBuffer& table, const Case& c) {
    const int64_t d = c.row_bytes / static_cast<int64_t>(sizeof(float));
    const Tensor t = Tensor::Borrow(table.data(), DType::kF32, {c.table_rows, d});
    const Tensor ids = Tensor::Borrow(const_cast<int64_t*>(c.ids.data()), DType::kI64, {c.rows});
    Tensor y = Tensor::Borrow(out_.data(), DType::kF32, {c.rows, d});
    return gather_->Call({&t, &ids}, {&y}, pool_);
  }

  // Each variant on a cleared output, checked against the table, before anything is timed.
  Status Validate(const MappedBuffer& table, const Case& c) {
    const int64_t bytes = c.rows * c.row_bytes;
    auto check = [&](const char* what) -> Status {
      const int64_t wrong = FirstWrongRow(table.data(), c.row_bytes, c.ids.data(), c.rows, out_.data());
      if (wrong < 0) return Status::Ok();
      return InternalError(std::string(what) + " wrote a wrong row " + std::to_string(wrong));
    };
    std::memset(out_.data(), 0, static_cast<size_t>(bytes));
    NaiveGather(table, c);
    TESSEL_RETURN_IF_ERROR(check("the naive loop"));
    std::memset(out_.data(), 0, static_cast<size_t>(bytes));
    TESSEL_RETURN_IF_ERROR(PluginGather(table, c));
    return check("gather.rows");
  }

  const Options& options_;
  const workers::Kernel* gather_;
  ThreadPool* pool_;
  std::vector<MappedBuffer> tables_;
  MappedBuffer out_, src_;
};

// ---- output ---------------------------------------------------------------------------------------------

Json CommonKeys(const Options& o, const CaseResult& c) {
  Json row = {{"bench", "gather"},
              {"case", "rows_" + std::to_string(c.row_bytes) + "B"},
              {"row_bytes", c.row_bytes},
              {"rows", c.rows},
              {"table_rows", c.table_rows},
              {"table_bytes", o.table_bytes},
              {"threads", o.threads},
              {"repetitions", o.repetitions},
              {"seed", static_cast<int64_t>(o.seed)},
              {"counts", "read + write"},
              {"load_avg", c.load_avg},
              {"busy_before", Round(c.busy_before)},
              {"others_busy", Round(c.others_busy)}};
  if (!o.commit.empty()) row["commit"] = o.commit;
  return row;
}

// The value of a row: null when the measurement failed.
Json ValueOrNull(bool ok, double value) { return ok ? Json(value) : Json(); }

void WriteCaseRows(Json& rows, const Options& o, const CaseResult& c) {
  const double stream = Median(c.stream), stream_nt = Median(c.stream_nt);
  const double limit = std::max(stream, stream_nt);
  auto copy_row = [&](const char* metric, const std::vector<double>& samples, const char* method) {
    Json row = CommonKeys(o, c);
    row.update(Json{{"metric", metric},
                    {"value", Round(Median(samples))},
                    {"unit", "GB/s"},
                    {"method", method},
                    {"samples", samples}});
    rows.push_back(std::move(row));
  };
  copy_row("stream_copy_gbps", c.stream, "memcpy, the batch's bytes, same split and threads (tessel-bench-limits)");
  copy_row("stream_copy_nt_gbps", c.stream_nt, "non-temporal stores, the batch's bytes, same split and threads");
  for (const PagesResult& p : c.by_pages) {
    const double naive = Median(p.naive), gather = Median(p.gather);
    const bool ok = p.error.empty() && !p.gather.empty();
    Json row = CommonKeys(o, c);
    row.update(Json{{"metric", "naive_memcpy_gbps"},
                    {"pages", PagesName(p.pages)},
                    {"huge_page_fraction", Round(p.huge_fraction)},
                    {"value", ValueOrNull(ok, Round(naive))},
                    {"unit", "GB/s"},
                    {"samples", p.naive},
                    {"baseline", Round(stream)},
                    {"baseline_metric", "stream_copy_gbps"},
                    {"ratio", Round(naive / stream)}});
    rows.push_back(std::move(row));

    row = CommonKeys(o, c);
    row.update(Json{{"metric", "gather_gbps"},
                    {"pages", PagesName(p.pages)},
                    {"huge_page_fraction", Round(p.huge_fraction)},
                    {"value", ValueOrNull(ok, Round(gather))},
                    {"unit", "GB/s"},
                    {"samples", p.gather},
                    {"status", ok ? "ok" : "error"}});
    if (!ok) row["error"] = p.error;
    row.update(Json{{"baseline", Round(naive)},
                    {"baseline_metric", "naive_memcpy_gbps"},
                    {"ratio", Round(gather / naive)},
                    {"fraction_of_stream_copy", Round(gather / stream)},
                    {"fraction_of_stream_copy_nt", Round(gather / stream_nt)},
                    {"fraction_of_limit", Round(gather / limit)}});
    if (c.row_bytes == kTargetRowBytes) {
      row.update(Json{{"target_fraction_of_stream_copy", kTargetOfStream},
                      {"target_ratio", kTargetOfNaive},
                      {"meets_target", ok && gather >= kTargetOfStream * stream && gather >= kTargetOfNaive * naive}});
    }
    rows.push_back(std::move(row));
  }
}

void WriteGpuRows(Json& rows, const Options& o, const GpuReport& g) {
  auto begin = [&](const char* case_name, const char* metric) {
    Json row = {{"bench", "gather"}, {"case", case_name}, {"metric", metric}, {"threads", o.threads}};
    if (!o.commit.empty()) row["commit"] = o.commit;
    return row;
  };
  if (!g.skipped.empty()) {
    Json row = begin("gpu", "gpu");
    row.update(Json{{"value", nullptr}, {"unit", ""}, {"status", "skipped"}, {"error", g.skipped}});
    rows.push_back(std::move(row));
    return;
  }
  const double h2d = Median(g.h2d_gbps);
  Json row = begin("gpu", "h2d_pinned_gbps");
  row.update(Json{{"device", g.device},
                  {"value", Round(h2d)},
                  {"unit", "GB/s"},
                  {"bytes", g.h2d_bytes},
                  {"samples", g.h2d_gbps},
                  {"counts", "bytes copied"},
                  {"status", g.h2d_error.empty() ? "ok" : "error"}});
  if (!g.h2d_error.empty()) row["error"] = g.h2d_error;
  rows.push_back(std::move(row));
  for (const GpuCase& c : g.cases) {
    const std::string name = "gpu_rows_" + std::to_string(c.row_bytes) + "B";
    const double useful = static_cast<double>(c.rows * c.row_bytes);
    const double zc_ms = Median(c.zero_copy_ms), st_ms = Median(c.staged_ms);
    const bool ok = c.error.empty() && !c.zero_copy_ms.empty();
    for (int staged = 0; staged < 2; ++staged) {
      const double ms = staged ? st_ms : zc_ms;
      row = begin(name.c_str(), staged ? "staged_gather_gbps" : "zero_copy_gather_gbps");
      row.update(Json{{"device", g.device},
                      {"row_bytes", c.row_bytes},
                      {"rows", c.rows},
                      {"value", ValueOrNull(ok, Round(useful / (ms / 1e3) / 1e9))},
                      {"unit", "GB/s"},
                      {"counts", "useful row bytes (rows x row_bytes), end to end"},
                      {"ms", Round(ms)},
                      {"samples_ms", staged ? c.staged_ms : c.zero_copy_ms},
                      {"status", ok ? "ok" : "error"}});
      if (!ok) row["error"] = c.error;
      if (!staged && ok) {
        row.update(Json{{"baseline", Round(useful / (st_ms / 1e3) / 1e9)},
                        {"baseline_metric", "staged_gather_gbps"},
                        {"ratio", Round(st_ms / zc_ms)},
                        {"fraction_of_limit", Round(useful / (zc_ms / 1e3) / 1e9 / h2d)}});
      }
      rows.push_back(std::move(row));
    }
  }
}

void PrintTable(const Options& o, const std::vector<CaseResult>& results) {
  std::printf(
      "\ngather.rows: %d threads, table %lld MiB of random rows, %lld MiB of rows per batch, uniform ids "
      "(seed %llu), median of %d\nGB/s = (bytes read + bytes written) / s; stream = memcpy (regular stores "
      "at this size), stream_nt = non-temporal stores\n\n",
      o.threads, static_cast<long long>(o.table_bytes / kMiB), static_cast<long long>(o.out_bytes / kMiB),
      static_cast<unsigned long long>(o.seed), o.repetitions);
  std::printf("%9s %-5s %7s %9s %7s %7s %13s %12s %16s %7s\n", "row_bytes", "pages", "stream", "stream_nt", "naive",
              "gather", "gather/stream", "gather/naive", "gather/stream_nt", "others");
  for (const CaseResult& c : results) {
    const double stream = Median(c.stream), stream_nt = Median(c.stream_nt);
    for (const PagesResult& p : c.by_pages) {
      const double naive = Median(p.naive), gather = Median(p.gather);
      if (!p.error.empty()) {
        std::printf("%9lld %-5s %7.1f %9.1f  error: %s\n", static_cast<long long>(c.row_bytes), PagesName(p.pages),
                    stream, stream_nt, p.error.c_str());
        continue;
      }
      std::printf("%9lld %-5s %7.1f %9.1f %7.1f %7.1f %13.2f %12.2f %16.2f %6.0f%%\n",
                  static_cast<long long>(c.row_bytes), PagesName(p.pages), stream, stream_nt, naive, gather,
                  gather / stream, gather / naive, gather / stream_nt, 100 * c.others_busy);
    }
  }
  std::printf(
      "others: the share of the cores that other processes used during that row size (its figures are "
      "only comparable with those of the same row)\n");
  std::printf("\nhuge pages actually backing each table:");
  if (!results.empty()) {
    for (const PagesResult& p : results.back().by_pages) {
      std::printf(" %s %.0f%%", PagesName(p.pages), p.huge_fraction < 0 ? -1.0 : 100 * p.huge_fraction);
    }
  }
  std::printf("\n");
  for (const CaseResult& c : results) {
    if (c.row_bytes != kTargetRowBytes) continue;
    for (const PagesResult& p : c.by_pages) {
      if (!p.error.empty()) continue;
      const double of_stream = Median(p.gather) / Median(c.stream), of_naive = Median(p.gather) / Median(p.naive);
      std::printf(
          "acceptance (512 B rows, %s pages): gather/stream %.2f (target >= %.2f: %s), gather/naive %.2f "
          "(target >= %.2f: %s)\n",
          PagesName(p.pages), of_stream, kTargetOfStream, of_stream >= kTargetOfStream ? "met" : "NOT met", of_naive,
          kTargetOfNaive, of_naive >= kTargetOfNaive ? "met" : "NOT met");
    }
  }
}

void PrintGpu(const GpuReport& g) {
  if (!g.skipped.empty()) {
    std::printf("\nGPU: %s\n", g.skipped.c_str());
    return;
  }
  std::printf("\nGPU %s: pinned host-to-device copy %.1f GB/s (%lld MiB, median)%s%s\n", g.device.c_str(),
              Median(g.h2d_gbps), static_cast<long long>(g.h2d_bytes / kMiB),
              g.h2d_error.empty() ? "" : "; error: ", g.h2d_error.c_str());
  std::printf("GB/s of useful rows (rows x row_bytes / end-to-end time)\n%9s %10s %10s %12s %11s %13s\n", "row_bytes",
              "zero_copy", "staged", "zero_copy_ms", "staged_ms", "staged/zero");
  for (const GpuCase& c : g.cases) {
    if (!c.error.empty()) {
      std::printf("%9lld error: %s\n", static_cast<long long>(c.row_bytes), c.error.c_str());
      continue;
    }
    const double useful = static_cast<double>(c.rows * c.row_bytes);
    const double zc = Median(c.zero_copy_ms), st = Median(c.staged_ms);
    std::printf("%9lld %10.1f %10.1f %12.2f %11.2f %13.2f\n", static_cast<long long>(c.row_bytes),
                useful / (zc / 1e3) / 1e9, useful / (st / 1e3) / 1e9, zc, st, st / zc);
  }
}

// ---- options --------------------------------------------------------------------------------------------

int Usage(const char* why) {
  std::fprintf(stderr,
               "tessel-bench-gather: %s\nusage: tessel-bench-gather [--threads N] [--quick] [--table-mib N] "
               "[--out-mib N] [--reps N] [--rows 128,256,...] [--pages huge|4k|both] [--seed S] [--json FILE] "
               "[--plugin FILE] [--commit ID] [--wait-idle S]\n",
               why);
  return 2;
}

// Returns 0 to run, or an exit code.
int ParseOptions(int argc, char** argv, Options* o) {
  bool table_set = false, out_set = false, reps_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    int64_t v = 0;
    if (arg == "--quick") {
      o->quick = true;
    } else if (arg == "--threads" && has_value) {
      if (!ParseInt(argv[++i], 1, 1024, &v)) return Usage("--threads must be 1 .. 1024");
      o->threads = static_cast<int>(v);
    } else if (arg == "--table-mib" && has_value) {
      if (!ParseInt(argv[++i], 1, int64_t{1} << 24, &v)) return Usage("--table-mib must be a positive number");
      o->table_bytes = v * kMiB;
      table_set = true;
    } else if (arg == "--out-mib" && has_value) {
      if (!ParseInt(argv[++i], 1, int64_t{1} << 20, &v)) return Usage("--out-mib must be a positive number");
      o->out_bytes = v * kMiB;
      out_set = true;
    } else if (arg == "--reps" && has_value) {
      if (!ParseInt(argv[++i], 1, 1000, &v)) return Usage("--reps must be 1 .. 1000");
      o->repetitions = static_cast<int>(v);
      reps_set = true;
    } else if (arg == "--seed" && has_value) {
      if (!ParseInt(argv[++i], 0, INT64_MAX, &v)) return Usage("--seed must be a non-negative number");
      o->seed = static_cast<uint64_t>(v);
    } else if (arg == "--rows" && has_value) {
      o->row_sizes.clear();
      std::string list = argv[++i];
      for (size_t pos = 0; pos <= list.size();) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        if (!ParseInt(list.substr(pos, comma - pos).c_str(), 4, 1 << 20, &v) || v % 4 != 0) {
          return Usage("--rows takes row sizes in bytes, multiples of 4 (f32 rows)");
        }
        o->row_sizes.push_back(v);
        pos = comma + 1;
      }
    } else if (arg == "--pages" && has_value) {
      const std::string_view p = argv[++i];
      if (p == "huge") {
        o->pages = {Pages::kHuge};
      } else if (p == "4k") {
        o->pages = {Pages::kSmall};
      } else if (p == "both") {
        o->pages = {Pages::kHuge, Pages::kSmall};
      } else {
        return Usage("--pages takes huge, 4k or both");
      }
    } else if (arg == "--json" && has_value) {
      o->json = argv[++i];
    } else if (arg == "--plugin" && has_value) {
      o->plugin = argv[++i];
    } else if (arg == "--commit" && has_value) {
      o->commit = argv[++i];
    } else if (arg == "--wait-idle" && has_value) {
      if (!ParseInt(argv[++i], 0, 86400, &v)) return Usage("--wait-idle takes seconds");
      o->wait_idle = static_cast<double>(v);
    } else if (arg == "--help" || arg == "-h") {
      Usage("measures gather.rows against a stream copy and a naive memcpy loop; prints a table, writes JSON");
      return 0;
    } else {
      return Usage(("unknown or incomplete argument " + std::string(arg)).c_str());
    }
  }
  if (o->quick) {
    if (!table_set) o->table_bytes = 512 * kMiB;
    if (!out_set) o->out_bytes = 64 * kMiB;
    if (!reps_set) o->repetitions = 5;
  }
  for (int64_t rb : o->row_sizes) {
    if (rb > o->out_bytes || rb > o->table_bytes) return Usage("a row is larger than the table or the batch");
  }
  return -1;
}

int Main(int argc, char** argv) {
  Options options;
  if (const int code = ParseOptions(argc, argv, &options); code >= 0) return code;
  workers::KernelRegistry registry(Logger("bench", LogLevel::kWarn));
  if (Status st = registry.LoadPlugin(options.plugin); !st.ok()) {
    std::fprintf(stderr, "tessel-bench-gather: %s\n", st.ToString().c_str());
    return 2;
  }
  Result<const workers::Kernel*> gather = registry.Find(tessel_op_gather_rows.name, Device::kCpu);
  if (!gather.ok()) {
    std::fprintf(stderr, "tessel-bench-gather: %s\n", gather.status().ToString().c_str());
    return 2;
  }
  ThreadPool pool(options.threads);
  Bench bench(options, *gather, &pool);
  if (Status st = bench.Allocate(); !st.ok()) {
    std::fprintf(stderr, "tessel-bench-gather: %s\n", st.ToString().c_str());
    return 2;
  }
  std::vector<CaseResult> results;
  int failures = 0;
  for (int64_t row_bytes : options.row_sizes) {
    const double busy = WaitIdle(options.wait_idle);
    const double load = LoadAverage();
    std::fprintf(stderr, "[gather] %lld-byte rows (cores %.0f%% busy before)...\n", static_cast<long long>(row_bytes),
                 100 * busy);
    const CpuSample before = SampleCpu();
    results.push_back(bench.Measure(row_bytes));
    CaseResult& c = results.back();
    c.busy_before = busy;
    c.others_busy = OthersBusyFraction(before, SampleCpu());
    c.load_avg = load;
    for (const PagesResult& p : results.back().by_pages) failures += p.error.empty() ? 0 : 1;
  }
  PrintTable(options, results);

  GpuInputs gpu_in;
  gpu_in.registry = &registry;
  gpu_in.pool = &pool;
  gpu_in.table = bench.tables().front().data();
  gpu_in.table_bytes = options.table_bytes;
  gpu_in.out_bytes = options.out_bytes;
  gpu_in.row_sizes = options.row_sizes;
  gpu_in.repetitions = std::max(5, options.repetitions);
  gpu_in.seed = options.seed;
  const GpuReport gpu = MeasureGpu(gpu_in);
  PrintGpu(gpu);
  for (const GpuCase& c : gpu.cases) failures += c.error.empty() ? 0 : 1;

  Json rows = Json::array();
  for (const CaseResult& c : results) WriteCaseRows(rows, options, c);
  WriteGpuRows(rows, options, gpu);
  if (!WriteJsonRows("tessel-bench-gather", options.json, rows)) return 2;
  return failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace tessel::bench

int main(int argc, char** argv) { return tessel::bench::Main(argc, argv); }

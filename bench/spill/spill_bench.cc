// tessel-bench-spill: the `spill` family of bench/run.sh (bench/spill/README.md). In one run, in one
// directory (the spill dir, this user's /tmp/tessel-UID/spill by default) and for each slot size, it measures:
//   - raw write: the total in slot-sized pwrites with O_DIRECT from an aligned buffer, fsync at the end;
//   - raw read: the same file read back with O_DIRECT;
//   - spill write: SpillStore::Write of every slot plus a Sync, until Wait of the Sync returns;
//   - spill read: SpillStore::Read of every slot after posix_fadvise(DONTNEED) on the spill file.
// A byte counts as written only once it reached the disk (fsync), and reads start with the file out of the
// page cache. Where the filesystem refuses O_DIRECT (tmpfs), the raw figures are buffered writes + fsync
// and reads after posix_fadvise(DONTNEED), and the table says so. Repetitions run round-robin (raw, spill,
// raw, spill, ...) so that a change in the machine's load falls on both; medians are reported.
//
// Usage: tessel-bench-spill [--dir DIR] [--quick] [--total-mib N] [--slot-mib 8,64] [--reps N]
//                           [--checksum off|on|both] [--json FILE] [--commit ID]
// Exit 0 when every measurement ran, 1 when one failed (the row has status and error), 2 usage or setup.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/common/bench_common.h"
#include "bench/common/bench_json.h"
#include "core/json.h"
#include "core/logging.h"
#include "storage/spill_store.h"

namespace tessel::bench {
namespace {

using storage::SpillStore;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr double kTargetWriteOfRaw = 0.80;  // the acceptance point: spill write >= 80% of raw

struct Options {
  std::string dir = storage::SpillDirectory("");  // the [spill] dir default: /tmp/tessel-UID/spill
  bool quick = false;
  int64_t total_bytes = 2048 * kMiB;
  std::vector<int64_t> slot_bytes = {8 * kMiB, 64 * kMiB};
  std::vector<bool> checksum = {false, true};
  int repetitions = 5;
  std::string json = std::string(TESSEL_BINARY_DIR) + "/bench/results/spill.json";
  std::string commit;
};

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, AlignedFree>;

Buffer Allocate(int64_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, static_cast<size_t>(bytes)) != 0) return nullptr;
  return Buffer(static_cast<uint8_t*>(p));
}

// Drops the file's pages from the page cache (they are clean after fsync, so the kernel can).
void DropCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// The raw file: O_DIRECT when the filesystem allows it.
class RawFile {
 public:
  explicit RawFile(std::string path) : path_(std::move(path)) {}
  ~RawFile() {
    if (fd_ >= 0) ::close(fd_);
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;

  Status Open() {
    // A new file, never through a link or over another file (core/safe_file.h's rule).
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_DIRECT, 0600);
    direct_ = fd_ >= 0;
    if (fd_ < 0 && errno == EINVAL)
      fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) return StorageError(StrCat(path_, ": ", std::strerror(errno)));
    return Status::Ok();
  }
  bool direct() const { return direct_; }

  // Seconds for writing `total` bytes in `slot`-sized pwrites of `src`, fsync included.
  Result<double> Write(const uint8_t* src, int64_t slot, int64_t total) {
    const auto t0 = Clock::now();
    for (int64_t off = 0; off < total; off += slot)
      TESSEL_RETURN_IF_ERROR(Transfer(true, const_cast<uint8_t*>(src), slot, off));
    if (::fsync(fd_) != 0) return StorageError(StrCat(path_, ": fsync: ", std::strerror(errno)));
    return SecondsSince(t0);
  }
  Result<double> Read(uint8_t* dst, int64_t slot, int64_t total) {
    if (!direct_) DropCache(path_);
    const auto t0 = Clock::now();
    for (int64_t off = 0; off < total; off += slot) TESSEL_RETURN_IF_ERROR(Transfer(false, dst, slot, off));
    return SecondsSince(t0);
  }

 private:
  Status Transfer(bool write, uint8_t* buffer, int64_t length, int64_t offset) {
    int64_t done = 0;
    while (done < length) {
      const ssize_t n = write ? ::pwrite(fd_, buffer + done, static_cast<size_t>(length - done), offset + done)
                              : ::pread(fd_, buffer + done, static_cast<size_t>(length - done), offset + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        return StorageError(StrCat(path_, write ? ": write: " : ": read: ", n < 0 ? std::strerror(errno) : "short"));
      done += n;
    }
    return Status::Ok();
  }

  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
};

struct CaseResult {
  int64_t slot_bytes = 0;
  bool checksum = false;
  bool raw_direct = false;
  int64_t spill_file_bytes = 0;
  std::vector<double> raw_write, raw_read, spill_write, spill_read;  // GB/s per repetition
  std::string error;
};

Status Check(Status st, const char* what) { return st.ok() ? st : st.WithContext(what); }

Status RunCase(const Options& o, const uint8_t* src, uint8_t* dst, CaseResult* r) {
  const int64_t slot = r->slot_bytes;
  const int64_t slots = o.total_bytes / slot;
  const int64_t total = slots * slot;
  const double gb = static_cast<double>(total) / 1e9;
  RawFile raw(StrCat(o.dir, "/raw-bench.", ::getpid(), ".bin"));
  TESSEL_RETURN_IF_ERROR(raw.Open());
  r->raw_direct = raw.direct();
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<SpillStore> store,
                          SpillStore::Open({o.dir, "bench", r->checksum, /*budget_bytes=*/0}));
  std::vector<SpillStore::Ticket> tickets;
  for (int rep = 0; rep < o.repetitions; ++rep) {
    TESSEL_ASSIGN_OR_RETURN(double raw_write, raw.Write(src, slot, total));
    r->raw_write.push_back(gb / raw_write);
    TESSEL_ASSIGN_OR_RETURN(double raw_read, raw.Read(dst, slot, total));
    r->raw_read.push_back(gb / raw_read);

    tickets.clear();
    auto t0 = Clock::now();
    for (int64_t s = 0; s < slots; ++s) tickets.push_back(store->Write(s, src, slot));
    tickets.push_back(store->Sync());
    for (SpillStore::Ticket t : tickets) TESSEL_RETURN_IF_ERROR(Check(store->Wait(t), "spill write"));
    r->spill_write.push_back(gb / SecondsSince(t0));

    DropCache(store->path());
    tickets.clear();
    t0 = Clock::now();
    for (int64_t s = 0; s < slots; ++s) tickets.push_back(store->Read(s, dst, slot));
    for (SpillStore::Ticket t : tickets) TESSEL_RETURN_IF_ERROR(Check(store->Wait(t), "spill read"));
    r->spill_read.push_back(gb / SecondsSince(t0));
    // Every slot holds src: the last one read must equal it.
    if (std::memcmp(dst, src, static_cast<size_t>(slot)) != 0) {
      return InternalError(StrCat("spill read returned bytes that differ from those written (slot ", slots - 1, ")"));
    }
  }
  r->spill_file_bytes = store->stats().file_bytes;
  return Status::Ok();
}

std::string CaseName(const CaseResult& c) {
  return StrCat("slots_", c.slot_bytes / kMiB, "MiB", c.checksum ? "_checksum" : "");
}

void WriteRows(Json& rows, const Options& o, const CaseResult& c) {
  const bool ok = c.error.empty();
  auto row = [&](const char* metric, const std::vector<double>& samples, const std::vector<double>* raw,
                 const char* raw_metric, const char* method) {
    Json r = {{"bench", "spill"},
              {"case", CaseName(c)},
              {"metric", metric},
              {"value", ok ? Json(Round(Median(samples))) : Json()},
              {"unit", "GB/s"},
              {"samples", samples},
              {"method", method},
              {"slot_bytes", c.slot_bytes},
              {"total_bytes", o.total_bytes / c.slot_bytes * c.slot_bytes},
              {"checksum", c.checksum},
              {"raw_io", c.raw_direct ? "O_DIRECT" : "buffered + fsync (O_DIRECT refused)"},
              {"dir", o.dir},
              {"repetitions", o.repetitions},
              {"status", ok ? "ok" : "error"}};
    if (!ok) r["error"] = c.error;
    if (raw != nullptr && ok) {
      const double base = Median(*raw);
      r.update(Json{{"baseline", Round(base)},
                    {"baseline_metric", raw_metric},
                    {"ratio", Round(Median(samples) / base)},
                    {"fraction_of_limit", Round(Median(samples) / base)}});
      if (std::string_view(metric) == "spill_write_gbps") {
        r.update(
            Json{{"target_ratio", kTargetWriteOfRaw}, {"meets_target", Median(samples) >= kTargetWriteOfRaw * base}});
      }
    }
    if (!o.commit.empty()) r["commit"] = o.commit;
    rows.push_back(std::move(r));
  };
  row("raw_write_gbps", c.raw_write, nullptr, "", "slot-sized pwrite, O_DIRECT, fsync at the end (the limit)");
  row("raw_read_gbps", c.raw_read, nullptr, "", "slot-sized pread, O_DIRECT (the limit)");
  row("spill_write_gbps", c.spill_write, &c.raw_write, "raw_write_gbps", "SpillStore::Write of every slot + Sync");
  row("spill_read_gbps", c.spill_read, &c.raw_read, "raw_read_gbps",
      "SpillStore::Read of every slot after posix_fadvise(DONTNEED)");
}

void PrintTable(const Options& o, const std::vector<CaseResult>& results) {
  std::printf(
      "\nspill: %s, %lld MiB per case, median of %d; GB/s = bytes / s, writes until on disk (fsync), reads "
      "from outside the page cache\n\n",
      o.dir.c_str(), static_cast<long long>(o.total_bytes / kMiB), o.repetitions);
  std::printf("%-22s %-9s %9s %11s %11s %9s %8s %11s %11s\n", "case", "raw_io", "raw_write", "spill_write",
              "write_ratio", "raw_read", "spill_read", "read_ratio", "file_MiB");
  for (const CaseResult& c : results) {
    if (!c.error.empty()) {
      std::printf("%-22s error: %s\n", CaseName(c).c_str(), c.error.c_str());
      continue;
    }
    const double rw = Median(c.raw_write), sw = Median(c.spill_write), rr = Median(c.raw_read),
                 sr = Median(c.spill_read);
    std::printf("%-22s %-9s %9.2f %11.2f %11.2f %9.2f %8.2f %11.2f %11lld\n", CaseName(c).c_str(),
                c.raw_direct ? "O_DIRECT" : "buffered", rw, sw, sw / rw, rr, sr, sr / rr,
                static_cast<long long>(c.spill_file_bytes / kMiB));
  }
  for (const CaseResult& c : results) {
    if (!c.raw_direct && c.error.empty()) {
      std::printf(
          "raw_io buffered: %s refused O_DIRECT, so raw figures are buffered write + fsync and reads after "
          "posix_fadvise(DONTNEED)\n",
          o.dir.c_str());
      break;
    }
  }
  for (const CaseResult& c : results) {
    if (!c.error.empty()) continue;
    const double ratio = Median(c.spill_write) / Median(c.raw_write);
    std::printf("acceptance (%s): spill write / raw write %.2f (target >= %.2f: %s)\n", CaseName(c).c_str(), ratio,
                kTargetWriteOfRaw, ratio >= kTargetWriteOfRaw ? "met" : "NOT met");
  }
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "tessel-bench-spill: %s\nusage: tessel-bench-spill [--dir DIR] [--quick] [--total-mib N] "
               "[--slot-mib 8,64] [--reps N] [--checksum off|on|both] [--json FILE] [--commit ID]\n",
               why);
  return 2;
}

int ParseOptions(int argc, char** argv, Options* o) {
  bool total_set = false, reps_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    int64_t v = 0;
    if (arg == "--quick") {
      o->quick = true;
    } else if (arg == "--dir" && has_value) {
      o->dir = argv[++i];
    } else if (arg == "--total-mib" && has_value) {
      if (!ParseInt(argv[++i], 1, int64_t{1} << 24, &v)) return Usage("--total-mib must be a positive number");
      o->total_bytes = v * kMiB;
      total_set = true;
    } else if (arg == "--slot-mib" && has_value) {
      o->slot_bytes.clear();
      const std::string list = argv[++i];
      for (size_t pos = 0; pos <= list.size();) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        if (!ParseInt(list.substr(pos, comma - pos).c_str(), 1, 4096, &v))
          return Usage("--slot-mib takes MiB, 1 .. 4096");
        o->slot_bytes.push_back(v * kMiB);
        pos = comma + 1;
      }
    } else if (arg == "--reps" && has_value) {
      if (!ParseInt(argv[++i], 1, 1000, &v)) return Usage("--reps must be 1 .. 1000");
      o->repetitions = static_cast<int>(v);
      reps_set = true;
    } else if (arg == "--checksum" && has_value) {
      const std::string_view c = argv[++i];
      if (c == "off") {
        o->checksum = {false};
      } else if (c == "on") {
        o->checksum = {true};
      } else if (c == "both") {
        o->checksum = {false, true};
      } else {
        return Usage("--checksum takes off, on or both");
      }
    } else if (arg == "--json" && has_value) {
      o->json = argv[++i];
    } else if (arg == "--commit" && has_value) {
      o->commit = argv[++i];
    } else if (arg == "--help" || arg == "-h") {
      Usage("measures the spill store's write and read bandwidth against raw direct I/O on the same directory");
      return 0;
    } else {
      return Usage(("unknown or incomplete argument " + std::string(arg)).c_str());
    }
  }
  if (o->quick) {
    if (!total_set) o->total_bytes = 512 * kMiB;
    if (!reps_set) o->repetitions = 3;
  }
  for (int64_t s : o->slot_bytes) {
    if (s > o->total_bytes) return Usage("a slot is larger than the total");
  }
  return -1;
}

int Main(int argc, char** argv) {
  Options options;
  if (const int code = ParseOptions(argc, argv, &options); code >= 0) return code;
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  const int64_t max_slot = *std::max_element(options.slot_bytes.begin(), options.slot_bytes.end());
  Buffer src = Allocate(max_slot), dst = Allocate(max_slot);
  if (!src || !dst) {
    std::fprintf(stderr, "tessel-bench-spill: out of memory for two %lld MiB buffers\n",
                 static_cast<long long>(max_slot / kMiB));
    return 2;
  }
  // Incompressible bytes, in case the storage below compresses or deduplicates.
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < max_slot; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(src.get() + i, &x, 8);
  }
  std::vector<CaseResult> results;
  int failures = 0;
  for (int64_t slot : options.slot_bytes) {
    for (bool checksum : options.checksum) {
      CaseResult r;
      r.slot_bytes = slot;
      r.checksum = checksum;
      std::fprintf(stderr, "[spill] %s ...\n", CaseName(r).c_str());
      if (Status st = RunCase(options, src.get(), dst.get(), &r); !st.ok()) {
        r.error = st.ToString();
        ++failures;
      }
      results.push_back(std::move(r));
    }
  }
  PrintTable(options, results);
  Json rows = Json::array();
  for (const CaseResult& c : results) WriteRows(rows, options, c);
  if (!WriteJsonRows("tessel-bench-spill", options.json, rows)) return 2;
  return failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace tessel::bench

int main(int argc, char** argv) { return tessel::bench::Main(argc, argv); }

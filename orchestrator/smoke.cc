#include "orchestrator/smoke.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>
#include <thread>

#include "core/allocator.h"
#include "core/cuda_device.h"
#include "core/json.h"
#include "core/logging.h"
#include "jobs/spec.h"
#include "orchestrator/planners/stage_calibration.h"
#include "orchestrator/run_output.h"
#include "storage/spill_store.h"
#include "workers/comm/nccl_comm.h"
#include "workers/plugin_host/kernel_registry.h"
#include "workers/plugin_host/plugin_files.h"
#include "workers/plugin_host/plugin_report.h"

namespace tessel::orchestrator {
namespace {

using Clock = std::chrono::steady_clock;

// Tags of the smoke test's own messages (no job runs alongside it).
constexpr int kTagHello = 201, kTagGo = 202, kTagPing = 203;
constexpr int64_t kLatencyBytes = 8, kBandwidthBytes = int64_t{4} << 20, kAllreduceFloats = (int64_t{1} << 20) / 4;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Polls MPI_Test until the request completes or `deadline` passes (false). `spin`: no sleep between
// polls, for the ping-pong whose latency is measured; otherwise workers::Backoff's sleeps, so that ranks
// waiting their turn leave the cores to the two that measure (4 ranks may share 2 cores).
bool WaitUntil(MPI_Request* request, Clock::time_point deadline, bool spin = false) {
  workers::Backoff backoff;
  for (int done = 0;;) {
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (Clock::now() > deadline) return false;
    if (!spin) backoff.Wait();
  }
}

bool SendUntil(const void* data, int64_t bytes, int peer, int tag, Clock::time_point deadline, bool spin = false) {
  MPI_Request r;
  MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);
  return WaitUntil(&r, deadline, spin);
}

bool RecvUntil(void* data, int64_t bytes, int peer, int tag, Clock::time_point deadline, bool spin = false) {
  MPI_Request r;
  MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);
  return WaitUntil(&r, deadline, spin);
}

Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// --- this rank's own node ---------------------------------------------------------------------------

Json CheckSpill(const jobs::JobSpec& spec, int rank) {
  jobs::JobSpec probe = spec;
  probe.job.name = StrCat("tessel-smoke-rank", rank);  // ranks of one node share the directory
  Json j = Json::object();
  j["dir"] = storage::SpillDirectory(spec.spill.dir);
  Result<SpillBandwidth> bw = MeasureSpillBandwidth(probe, int64_t{16} << 20);
  if (!bw.ok()) {
    j["error"] = bw.status().message();
    return j;
  }
  j["free_bytes"] = bw->free_bytes;
  j["probe_bytes"] = bw->probe_bytes;
  j["write_bytes_per_second"] = bw->write_bytes_per_second;
  j["read_bytes_per_second"] = bw->read_bytes_per_second;
  return j;
}

// The plugin files a worker of `spec` would load (workers::KernelRegistry::LoadDefaults), then `extra`.
Json CheckPlugins(const jobs::JobSpec& spec, const std::vector<std::string>& extra) {
  Json j = Json::object();
  Json errors = Json::array();
  std::vector<std::string> files = spec.plugins.paths;
  std::vector<std::string> dirs = spec.plugins.search_dirs;
  if (files.empty() && dirs.empty()) {
    const std::vector<std::string> defaults = workers::DefaultPluginDirs();
    if (!defaults.empty()) dirs.push_back(defaults.front());
  }
  for (const std::string& dir : dirs) {
    Result<std::vector<std::string>> found = workers::FindPluginFiles(dir);
    if (!found.ok()) {
      errors.push_back(found.status().message());
      continue;
    }
    files.insert(files.end(), found->begin(), found->end());
  }
  files.insert(files.end(), extra.begin(), extra.end());
  if (files.empty())
    errors.push_back(StrCat("no plugin found in ", dirs.empty() ? std::string("(no directory)") : dirs.front()));
  for (const std::string& file : files) {
    std::ostringstream report;  // what `tessel plugin check FILE` prints; the error is enough here
    if (Status st = workers::CheckPlugin(file, {}, Device::kCpu, report); !st.ok()) errors.push_back(st.message());
  }
  if (errors.empty()) {
    // Each passed alone; together they must not offer the same (op, device) twice.
    workers::KernelRegistry together(Logger("tessel smoke", LogLevel::kError));
    for (const std::string& file : files) {
      if (Status st = together.LoadPlugin(file); !st.ok()) {
        errors.push_back(StrCat("loaded together: ", st.message()));
        break;
      }
    }
  }
  j["checked"] = static_cast<int64_t>(files.size());
  j["errors"] = std::move(errors);
  return j;
}

Json CheckGpus() {
  const CudaProbe probe = ProbeCuda();
  Json j = Json::object();
  j["count"] = probe.usable() ? probe.device_count : 0;
  j["memory_bytes"] = probe.memory_bytes;
  if (!probe.usable()) j["problem"] = probe.problem;
  return j;
}

// --- between ranks ----------------------------------------------------------------------------------

// Rank 0's side of the ping-pong with `peer`: one-way latency (seconds) and bandwidth (bytes a second),
// medians; false when a message did not arrive within `timeout` seconds.
bool PingPong(int peer, bool leader, double timeout, double* latency, double* bandwidth) {
  std::vector<uint8_t> buffer(static_cast<size_t>(kBandwidthBytes));
  // The other side's turn starts when the first ping arrives: it waits for that one asleep, for up to
  // `timeout` (the turns of the ranks before it), and spins from then on.
  bool started = leader;
  const auto round = [&](int64_t bytes) {
    const Clock::time_point deadline = After(timeout);
    if (leader) {
      return SendUntil(buffer.data(), bytes, peer, kTagPing, deadline, true) &&
             RecvUntil(buffer.data(), bytes, peer, kTagPing, deadline, true);
    }
    const bool spin = started;
    started = true;
    return RecvUntil(buffer.data(), bytes, peer, kTagPing, deadline, spin) &&
           SendUntil(buffer.data(), bytes, peer, kTagPing, deadline, true);
  };
  std::vector<double> small, large;
  for (int i = 0; i < 220; ++i) {
    const Clock::time_point t0 = Clock::now();
    if (!round(kLatencyBytes)) return false;
    if (i >= 20) small.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  for (int i = 0; i < 10; ++i) {
    const Clock::time_point t0 = Clock::now();
    if (!round(kBandwidthBytes)) return false;
    if (i >= 2) large.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  *latency = Median(small) / 2;
  *bandwidth = 2.0 * static_cast<double>(kBandwidthBytes) / std::max(Median(large), 1e-12);
  return true;
}

Result<double> TimeAllreduce() {
  std::vector<float> data(static_cast<size_t>(kAllreduceFloats), 1.0f);
  std::vector<double> times;
  for (int i = 0; i < 7; ++i) {
    TESSEL_RETURN_IF_ERROR(workers::MpiCheck(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"));
    const Clock::time_point t0 = Clock::now();
    TESSEL_RETURN_IF_ERROR(workers::MpiCheck(
        MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce"));
    if (i >= 2) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return Median(times);
}

// With a usable GPU on every rank: one GPU per rank (by its rank on the node), a 1 MiB NCCL allreduce.
// Collective. Returns the median seconds; when it cannot run (a rank without a GPU, a build without NCCL)
// it sets *skipped and *why and returns 0.
Result<double> TimeNcclAllreduce(bool* skipped, std::string* why) {
  const CudaProbe probe = ProbeCuda();
  int usable = probe.usable() ? 1 : 0;
  TESSEL_RETURN_IF_ERROR(
      workers::MpiCheck(MPI_Allreduce(MPI_IN_PLACE, &usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce"));
  *skipped = true;
  if (usable == 0) {
    *why = "not every rank has a GPU";
    return 0.0;
  }
  if (!workers::HaveNccl()) {
    *why = "this build has no NCCL";
    return 0.0;
  }
  *skipped = false;
  MPI_Comm node = MPI_COMM_NULL;
  TESSEL_RETURN_IF_ERROR(workers::MpiCheck(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type"));
  int local = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  TESSEL_RETURN_IF_ERROR(SelectCudaDevice(local % probe.device_count));
  TESSEL_ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<workers::MpiWorkerComm> all, workers::MpiWorkerComm::OverWorkers(true));
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<workers::DeviceComm> nccl, workers::MakeNcclComm(*all, stream.get()));
  const size_t bytes = static_cast<size_t>(kAllreduceFloats) * sizeof(float);
  TESSEL_ASSIGN_OR_RETURN(void* data, CudaAllocator().Allocate(bytes));
  std::vector<double> times;
  Status st = ZeroMemory(data, Device::kCuda, bytes, stream.get());
  for (int i = 0; i < 7 && st.ok(); ++i) {
    const Clock::time_point t0 = Clock::now();
    st = nccl->AllreduceSum(static_cast<float*>(data), kAllreduceFloats);
    if (st.ok()) st = SyncStream(Device::kCuda, stream.get());
    if (i >= 2) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  CudaAllocator().Free(data);
  TESSEL_RETURN_IF_ERROR(st);
  return Median(times);
}

// --- rank 0: the verdict and the table ----------------------------------------------------------------

struct Failure {
  int rank;
  std::string host, check, message;
  Code code;
};

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

double Number(const Json& j, const char* key, double otherwise = -1) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : otherwise;
}

// Judges every row against the limits, in the table's column order, and prints the table.
std::vector<Failure> Judge(const std::vector<Json>& rows, const jobs::SmokeSection& limits, std::ostream& out) {
  std::vector<Failure> failures;
  const auto fail = [&](const Json& row, const char* check, std::string message, Code code) {
    failures.push_back({row["rank"].get<int>(), row.value("host", std::string("?")), check, std::move(message), code});
  };
  const char* header[] = {"rank",       "host",      "mpi",     "latency", "p2p bw", "allreduce",
                          "spill free", "spill w/r", "plugins", "gpus",    "result"};
  std::vector<std::vector<std::string>> cells;
  cells.push_back(std::vector<std::string>(std::begin(header), std::end(header)));
  for (const Json& row : rows) {
    const size_t before = failures.size();
    std::vector<std::string> c(11);
    c[0] = std::to_string(row["rank"].get<int>());
    c[1] = row.value("host", std::string("?"));
    if (!row.value("reached", false)) {
      fail(row, "mpi", StrCat("no answer from this rank within ", limits.timeout_seconds, " s"), Code::kRankFailed);
      c[2] = "FAIL";
      for (size_t k = 3; k < 10; ++k) c[k] = "-";
      c[10] = "FAIL";
      cells.push_back(std::move(c));
      continue;
    }
    c[2] = "ok";
    const double latency = Number(row, "latency_seconds"), bandwidth = Number(row, "bandwidth_bytes_per_second");
    if (row["rank"].get<int>() == 0) {
      c[3] = c[4] = "-";
    } else if (latency < 0) {
      c[3] = c[4] = "FAIL";
      fail(row, "p2p", StrCat("no ping-pong answer from this rank within ", limits.timeout_seconds, " s"),
           Code::kRankFailed);
    } else {
      const std::string where = row.value("same_host", false) ? "same host as rank 0" : "between hosts";
      c[3] = Fixed(latency * 1e6, 1) + " us";
      c[4] = Fixed(bandwidth / 1e6, 0) + " MB/s";
      if (latency * 1e6 > limits.max_latency_us) {
        fail(
            row, "latency",
            StrCat("latency to rank 0 (", where, ") ", Fixed(latency * 1e6, 1), " us > ", limits.max_latency_us, " us"),
            Code::kRankFailed);
      }
      if (bandwidth / 1e6 < limits.min_bandwidth_mb_s) {
        fail(row, "bandwidth",
             StrCat("bandwidth to rank 0 (", where, ") ", Fixed(bandwidth / 1e6, 0), " MB/s < ",
                    limits.min_bandwidth_mb_s, " MB/s"),
             Code::kRankFailed);
      }
    }
    const double allreduce = Number(row, "allreduce_seconds");
    c[5] = Fixed(allreduce * 1e3, 2) + " ms";
    if (allreduce * 1e3 > limits.max_allreduce_ms) {
      fail(row, "allreduce",
           StrCat("1 MiB allreduce ", Fixed(allreduce * 1e3, 2), " ms > ", limits.max_allreduce_ms, " ms"),
           Code::kRankFailed);
    }
    const Json& spill = row["spill"];
    const double free_mb = Number(spill, "free_bytes") / 1e6;
    c[6] = free_mb >= 0 ? Fixed(free_mb, 1) + " MB" : "?";
    if (spill.contains("error")) {
      c[7] = "FAIL";
      fail(row, "spill", StrCat(spill["dir"].get<std::string>(), ": ", spill["error"].get<std::string>()),
           Code::kStorage);
    } else {
      const double w = Number(spill, "write_bytes_per_second") / 1e6, r = Number(spill, "read_bytes_per_second") / 1e6;
      c[7] = Number(spill, "probe_bytes", 0) > 0 ? Fixed(w, 0) + "/" + Fixed(r, 0) + " MB/s" : "-";
      if (free_mb < limits.min_spill_free_mb) {
        fail(row, "spill",
             StrCat(spill["dir"].get<std::string>(), ": ", Fixed(free_mb, 1), " MB free < ", limits.min_spill_free_mb,
                    " MB"),
             Code::kStorage);
      } else if (Number(spill, "probe_bytes", 0) <= 0) {
        fail(row, "spill", StrCat(spill["dir"].get<std::string>(), ": too little free space to measure"),
             Code::kStorage);
      } else if (std::min(w, r) < limits.min_spill_mb_s) {
        fail(row, "spill",
             StrCat(spill["dir"].get<std::string>(), ": write ", Fixed(w, 0), " MB/s, read ", Fixed(r, 0),
                    " MB/s; below ", limits.min_spill_mb_s, " MB/s"),
             Code::kStorage);
      }
    }
    const Json& plugins = row["plugins"];
    c[8] = plugins["errors"].empty() ? StrCat(plugins["checked"].get<int64_t>(), " ok") : "FAIL";
    for (const Json& e : plugins["errors"]) fail(row, "plugins", e.get<std::string>(), Code::kPlugin);
    const Json& gpus = row["gpus"];
    const int gpu_count = gpus["count"].get<int>();
    c[9] = std::to_string(gpu_count);
    if (gpu_count > 0) {
      int64_t least = INT64_MAX;
      for (const Json& m : gpus["memory_bytes"]) least = std::min(least, m.get<int64_t>());
      c[9] += StrCat(" x ", Fixed(static_cast<double>(least) / (1 << 30), 0), " GiB");
    }
    if (row.contains("nccl_allreduce_seconds"))
      c[9] += ", nccl " + Fixed(Number(row, "nccl_allreduce_seconds") * 1e3, 2) + " ms";
    if (gpu_count < limits.min_gpus) {
      fail(row, "gpus",
           StrCat(gpu_count, " usable GPUs < ", limits.min_gpus,
                  gpus.contains("problem") ? StrCat(": ", gpus["problem"].get<std::string>()) : ""),
           Code::kRankFailed);
    }
    if (row.contains("nccl_error")) fail(row, "nccl", row["nccl_error"].get<std::string>(), Code::kRankFailed);
    c[10] = failures.size() == before ? "PASS" : "FAIL";
    cells.push_back(std::move(c));
  }
  std::vector<size_t> width(11, 0);
  for (const auto& line : cells) {
    for (size_t k = 0; k < line.size(); ++k) width[k] = std::max(width[k], line[k].size());
  }
  for (const auto& line : cells) {
    std::string text;
    for (size_t k = 0; k < line.size(); ++k) {
      text += line[k];
      if (k + 1 < line.size()) text += std::string(width[k] - line[k].size() + 2, ' ');
    }
    out << text << "\n";
  }
  return failures;
}

}  // namespace

Status RunSmoke(const SmokeRequest& request, workers::MpiSession& session, std::ostream& out) {
  const int rank = session.world_rank(), size = session.world_size();
  jobs::JobSpec spec;
  if (request.job.empty() && !request.sets.empty()) {
    return UsageError("tessel smoke: --set needs a JOB file to apply to (the limits have flags of their own)");
  }
  if (!request.job.empty()) {
    TESSEL_ASSIGN_OR_RETURN(spec, jobs::LoadJobFile(request.job, request.sets));
  }
  jobs::SmokeSection limits = spec.smoke;
  if (spec.job.device == DeviceChoice::kCuda) limits.min_gpus = std::max(limits.min_gpus, 1);
  const SmokeOverrides& o = request.limits;
  limits.max_latency_us = o.max_latency_us.value_or(limits.max_latency_us);
  limits.min_bandwidth_mb_s = o.min_bandwidth_mb_s.value_or(limits.min_bandwidth_mb_s);
  limits.max_allreduce_ms = o.max_allreduce_ms.value_or(limits.max_allreduce_ms);
  limits.min_spill_free_mb = o.min_spill_free_mb.value_or(limits.min_spill_free_mb);
  limits.min_spill_mb_s = o.min_spill_mb_s.value_or(limits.min_spill_mb_s);
  limits.min_gpus = o.min_gpus.value_or(limits.min_gpus);
  limits.timeout_seconds = o.timeout_seconds.value_or(limits.timeout_seconds);
  if (!request.spill_dir.empty()) spec.spill.dir = request.spill_dir;

  Json row = Json::object();
  row["rank"] = rank;
  row["host"] = session.hostname();
  row["pid"] = static_cast<int64_t>(::getpid());
  row["spill"] = CheckSpill(spec, rank);
  row["plugins"] = CheckPlugins(spec, request.plugins);
  row["gpus"] = CheckGpus();

  // Reachability: every rank says hello to rank 0, which waits for all of them up to the timeout, then
  // tells each that answered whether to go on (only if all did: a collective with a missing rank hangs).
  std::vector<int> reached(static_cast<size_t>(size), 0);
  reached[0] = 1;
  int go = 1;
  if (rank == 0) {
    std::vector<MPI_Request> hellos(static_cast<size_t>(size), MPI_REQUEST_NULL);
    std::vector<int> dummy(static_cast<size_t>(size), 0);
    for (int r = 1; r < size; ++r)
      MPI_Irecv(&dummy[static_cast<size_t>(r)], 1, MPI_INT, r, kTagHello, MPI_COMM_WORLD,
                &hellos[static_cast<size_t>(r)]);
    const Clock::time_point deadline = After(limits.timeout_seconds);
    for (int r = 1; r < size; ++r)
      reached[static_cast<size_t>(r)] = WaitUntil(&hellos[static_cast<size_t>(r)], deadline) ? 1 : 0;
    go = std::all_of(reached.begin(), reached.end(), [](int v) { return v == 1; }) ? 1 : 0;
    for (int r = 1; r < size; ++r) {
      if (reached[static_cast<size_t>(r)]) (void)SendUntil(&go, sizeof go, r, kTagGo, After(limits.timeout_seconds));
    }
  } else {
    if (!SendUntil(&rank, sizeof rank, 0, kTagHello, After(limits.timeout_seconds)) ||
        !RecvUntil(&go, sizeof go, 0, kTagGo, After(2 * limits.timeout_seconds))) {
      session.SkipFinalize();
      return RankFailedError(StrCat("rank ", rank, " (", session.hostname(), "): rank 0 did not answer within ",
                                    limits.timeout_seconds, " s"));
    }
    if (!go) {
      session.SkipFinalize();
      return RankFailedError(StrCat("rank ", rank, ": another rank did not answer rank 0; see rank 0's table"));
    }
  }
  if (rank == 0 && !go) {
    std::vector<Json> rows;
    rows.push_back(row);
    rows.back()["reached"] = true;
    for (int r = 1; r < size; ++r) {
      if (!reached[static_cast<size_t>(r)]) rows.push_back(Json{{"rank", r}, {"host", "?"}, {"reached", false}});
    }
    const std::vector<Failure> failures = Judge(rows, limits, out);
    for (const Failure& f : failures)
      out << "FAIL rank " << f.rank << " (" << f.host << ") " << f.check << ": " << f.message << "\n";
    out.flush();
    session.SkipFinalize();
    MPI_Abort(MPI_COMM_WORLD, static_cast<int>(Code::kRankFailed));
    return RankFailedError("some ranks did not answer");
  }

  // Point to point, rank 0 with each rank in turn; the others wait their turn.
  std::vector<double> latency(static_cast<size_t>(size), -1), bandwidth(static_cast<size_t>(size), -1);
  int broken = 0;
  for (int r = 1; r < size; ++r) {
    if (rank == 0) {
      if (!PingPong(r, true, limits.timeout_seconds, &latency[static_cast<size_t>(r)],
                    &bandwidth[static_cast<size_t>(r)])) {
        latency[static_cast<size_t>(r)] = -1;
        broken = r;
        break;
      }
    } else if (rank == r) {
      double unused_latency = 0, unused_bandwidth = 0;
      // Its turn comes after the ranks before it: allow for each of theirs.
      if (!PingPong(0, false, limits.timeout_seconds * size, &unused_latency, &unused_bandwidth)) {
        session.SkipFinalize();
        return RankFailedError(StrCat("rank ", rank, " (", session.hostname(), "): the ping-pong with rank 0 stalled"));
      }
    }
  }
  if (rank == 0 && broken != 0) {
    out << "FAIL rank " << broken << ": the ping-pong with rank 0 stalled for " << limits.timeout_seconds << " s\n";
    out.flush();
    session.SkipFinalize();
    MPI_Abort(MPI_COMM_WORLD, static_cast<int>(Code::kRankFailed));
    return RankFailedError("the ping-pong stalled");
  }

  // The collectives start when rank 0 says the last pair is done: a rank waiting in MPI_Barrier spins,
  // and would take a core from the pairs still measuring.
  int done = 1;
  if (rank == 0) {
    for (int r = 1; r < size; ++r) (void)SendUntil(&done, sizeof done, r, kTagGo, After(limits.timeout_seconds));
  } else if (!RecvUntil(&done, sizeof done, 0, kTagGo, After(limits.timeout_seconds * size))) {
    session.SkipFinalize();
    return RankFailedError(StrCat("rank ", rank, " (", session.hostname(), "): rank 0 did not finish the ping-pongs"));
  }
  TESSEL_ASSIGN_OR_RETURN(const double allreduce, TimeAllreduce());
  row["allreduce_seconds"] = allreduce;
  bool nccl_skipped = true;
  std::string nccl_note;
  if (Result<double> nccl = TimeNcclAllreduce(&nccl_skipped, &nccl_note); !nccl.ok()) {
    row["nccl_error"] = nccl.status().message();
  } else if (!nccl_skipped) {
    row["nccl_allreduce_seconds"] = *nccl;
  } else {
    row["nccl_skipped"] = nccl_note;
  }

  // Every row to rank 0.
  const std::string mine = FormatJson(row, JsonLayout::kCompact);
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(size), 0), offsets(static_cast<size_t>(size), 0);
  TESSEL_RETURN_IF_ERROR(
      workers::MpiCheck(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather"));
  for (int r = 1; r < size; ++r)
    offsets[static_cast<size_t>(r)] = offsets[static_cast<size_t>(r - 1)] + lengths[static_cast<size_t>(r - 1)];
  std::string all(rank == 0 ? static_cast<size_t>(offsets.back() + lengths.back()) : 0, '\0');
  TESSEL_RETURN_IF_ERROR(workers::MpiCheck(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                                                       offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD),
                                           "MPI_Gatherv"));
  int verdict = 0;
  if (rank == 0) {
    std::vector<Json> rows;
    for (int r = 0; r < size; ++r) {
      TESSEL_ASSIGN_OR_RETURN(
          Json j, ParseJson(std::string_view(all).substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                                                         static_cast<size_t>(lengths[static_cast<size_t>(r)])),
                            StrCat("rank ", r, "'s smoke row")));
      j["reached"] = true;
      j["same_host"] = j["host"] == row["host"];
      if (r > 0) {
        j["latency_seconds"] = latency[static_cast<size_t>(r)];
        j["bandwidth_bytes_per_second"] = bandwidth[static_cast<size_t>(r)];
      }
      rows.push_back(std::move(j));
    }
    out << "tessel smoke: " << size << " ranks; limits: latency <= " << limits.max_latency_us
        << " us, p2p >= " << limits.min_bandwidth_mb_s << " MB/s, 1 MiB allreduce <= " << limits.max_allreduce_ms
        << " ms, spill free >= " << limits.min_spill_free_mb << " MB and >= " << limits.min_spill_mb_s
        << " MB/s, GPUs >= " << limits.min_gpus << "\n";
    const std::vector<Failure> failures = Judge(rows, limits, out);
    for (const Failure& f : failures)
      out << "FAIL rank " << f.rank << " (" << f.host << ") " << f.check << ": " << f.message << "\n";
    for (const Json& j : rows) {
      if (j.contains("nccl_skipped")) {
        out << "note: NCCL allreduce skipped: " << j["nccl_skipped"].get<std::string>() << "\n";
        break;
      }
    }
    std::set<int> failed_ranks;
    for (const Failure& f : failures) failed_ranks.insert(f.rank);
    out << (failures.empty() ? "PASS" : "FAIL") << ": " << size - static_cast<int>(failed_ranks.size()) << " of "
        << size << " ranks pass\n";
    out.flush();
    if (!request.json_path.empty()) {
      Json doc = Json::object();
      doc["ranks"] = rows;
      Json fails = Json::array();
      for (const Failure& f : failures)
        fails.push_back(Json{{"rank", f.rank}, {"host", f.host}, {"check", f.check}, {"message", f.message}});
      doc["failures"] = std::move(fails);
      TESSEL_RETURN_IF_ERROR(WriteFileAtomically(request.json_path, FormatJson(doc, JsonLayout::kIndented) + "\n"));
    }
    if (!failures.empty()) verdict = static_cast<int>(failures.front().code);
  }
  TESSEL_RETURN_IF_ERROR(workers::MpiCheck(MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast"));
  if (verdict == 0) return Status();
  // Every rank exits with the same code; rank 0 has printed why.
  return Status(static_cast<Code>(verdict),
                rank == 0 ? "the smoke test failed (see the table)"
                          : StrCat("rank ", rank, ": the smoke test failed (see rank 0's table)"));
}

}  // namespace tessel::orchestrator

// The run report: metrics.csv and summary.json in, one HTML page with inline SVG charts out. This file
// reads the run's files, chooses the charts and writes the page; svg_chart.h draws each chart.
// Everything written into the page passes through Escape; numbers go through FormatValue and the
// formatters below, so that no "nan", "inf" or "1e+12" reaches a reader.
#include "orchestrator/report.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/json.h"
#include "core/logging.h"
#include "monitoring/run_csv.h"
#include "orchestrator/run_output.h"
#include "orchestrator/svg_chart.h"

namespace tessel::orchestrator {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMiB = 1024.0 * 1024.0;
// The first version whose runs write metrics.csv.
constexpr const char* kMetricsCsvSince = "0.1.0";

// ----------------------------------------------------------------------------------------------------
// metrics.csv

// The columns the page draws, looked up by name. Each must be one that monitoring::RunCsv writes.
enum Col : int {
  kStepSeconds,
  kComputeSeconds,
  kPeerWaitSeconds,
  kLoss,
  kValLoss,
  kSamples,
  kGatherLocalBytes,
  kGatherRemoteBytes,
  kHaloSentBytes,
  kPipelineSentBytes,
  kSpillWrittenBytes,
  kSpillReadBytes,
  kUnixSeconds,
  kResidentBytes,
  kActivationBytes,
  kMemWeights,
  kMemGradients,
  kMemOptimizer,
  kMemActivations,
  kMemWorkspace,
  kMemGraph,
  kWaitAllreduce,
  kWaitAlltoall,
  kWaitP2p,
  kNumCols,
};
constexpr std::array<std::string_view, kNumCols> kColNames = {
    "step_seconds",
    "compute_seconds",
    "peer_wait_seconds",
    "loss",
    "val_loss",
    "samples",
    "gather_local_bytes",
    "gather_remote_bytes",
    "halo_sent_bytes",
    "pipeline_sent_bytes",
    "spill_written_bytes",
    "spill_read_bytes",
    "unix_seconds",
    "resident_bytes",
    "activation_bytes",
    "memory_weights_bytes",
    "memory_gradients_bytes",
    "memory_optimizer_bytes",
    "memory_activations_bytes",
    "memory_workspace_bytes",
    "memory_graph_bytes",
    "wait_allreduce_seconds",
    "wait_alltoall_seconds",
    "wait_p2p_seconds",
};

constexpr bool WrittenByRunCsv(std::string_view name) {
  for (std::string_view c : monitoring::kStepColumns) {
    if (c == name) return true;
  }
  return false;
}
constexpr bool AllColumnsWritten() {
  for (std::string_view n : kColNames) {
    if (!WrittenByRunCsv(n)) return false;
  }
  return true;
}
static_assert(AllColumnsWritten(), "the report draws a column that monitoring/run_csv.h does not write");

struct StepRow {
  int64_t step = 0;
  std::array<double, kNumCols> v;  // NaN: the cell was empty, or the column is absent
};

struct Metrics {
  std::map<int32_t, std::vector<StepRow>> ranks;  // each rank's rows by step, one per step
  bool skipped_truncated_line = false;
  std::set<int64_t> steps;  // every step any rank reported
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitCells(std::string_view line) {
  std::vector<std::string_view> cells;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      cells.push_back(Trim(line.substr(start)));
      return cells;
    }
    cells.push_back(Trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

// An empty cell is a missing value (NaN). "nan" and "inf" are numbers (a loss can be either); they are
// drawn as gaps.
bool ParseNumber(std::string_view cell, double* out) {
  if (cell.empty()) {
    *out = kNaN;
    return true;
  }
  const std::string s(cell);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

bool ParseInteger(std::string_view cell, int64_t* out) {
  if (cell.empty()) return false;
  const std::string s(cell);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size() || errno == ERANGE) return false;
  *out = v;
  return true;
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return StorageError(StrCat("cannot open ", path, " for reading: ", std::strerror(errno)));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return StorageError(StrCat("cannot read ", path));
  return text;
}

// Reads metrics.csv a line at a time (a long run's file can be large).
Result<Metrics> ReadMetrics(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return StorageError(StrCat("cannot open ", path, " for reading: ", std::strerror(errno)));
  std::string line;
  if (!std::getline(in, line) || Trim(line).empty()) return BadDataError(StrCat(path, ":1: no header line"));
  const std::string header_line = line;
  const std::vector<std::string_view> header = SplitCells(header_line);
  int rank_col = -1, step_col = -1;
  std::vector<int> col_of(header.size(), -1);  // header position -> Col, or -1
  std::vector<bool> known(header.size(), false);
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "rank" && rank_col < 0) rank_col = static_cast<int>(i);
    if (header[i] == "step" && step_col < 0) step_col = static_cast<int>(i);
    known[i] = WrittenByRunCsv(header[i]);
    for (int c = 0; c < kNumCols; ++c) {
      if (header[i] == kColNames[c] && std::find(col_of.begin(), col_of.end(), c) == col_of.end()) col_of[i] = c;
    }
  }
  if (rank_col < 0 || step_col < 0) {
    return BadDataError(StrCat(path, ":1: the header has no '", rank_col < 0 ? "rank" : "step", "' column"));
  }

  Metrics m;
  std::map<int32_t, std::vector<StepRow>> rows;
  // A line with too few cells is an error unless it is the last one: then the run was killed writing it.
  Status short_line;
  for (size_t line_no = 2; std::getline(in, line); ++line_no) {
    if (Trim(line).empty()) continue;
    if (!short_line.ok()) return short_line;
    const std::vector<std::string_view> cells = SplitCells(line);
    if (cells.size() != header.size()) {
      Status st =
          BadDataError(StrCat(path, ":", line_no, ": ", cells.size(), " cells where the header has ", header.size()));
      if (cells.size() > header.size()) return st;
      short_line = std::move(st);
      continue;
    }
    int64_t rank = 0;
    StepRow row;
    row.v.fill(kNaN);
    for (int which : {rank_col, step_col}) {
      int64_t* out = which == rank_col ? &rank : &row.step;
      if (!ParseInteger(cells[which], out)) {
        return BadDataError(
            StrCat(path, ":", line_no, ": column ", header[which], ": '", cells[which], "' is not an integer"));
      }
    }
    if (rank < 0 || rank > std::numeric_limits<int32_t>::max()) {
      return BadDataError(StrCat(path, ":", line_no, ": column rank: ", rank, " is not a rank"));
    }
    for (size_t c = 0; c < header.size(); ++c) {
      if (!known[c]) continue;  // a column of a later version, or rank and step
      double v = 0;
      if (!ParseNumber(cells[c], &v)) {
        return BadDataError(StrCat(path, ":", line_no, ": column ", header[c], ": '", cells[c], "' is not a number"));
      }
      if (col_of[c] >= 0) row.v[col_of[c]] = v;
    }
    m.steps.insert(row.step);
    rows[static_cast<int32_t>(rank)].push_back(row);
  }
  if (in.bad()) return StorageError(StrCat("cannot read ", path));
  m.skipped_truncated_line = !short_line.ok();
  // A resumed run writes the steps after its checkpoint again: the later row of a step wins.
  for (auto& [rank, list] : rows) {
    std::stable_sort(list.begin(), list.end(), [](const StepRow& a, const StepRow& b) { return a.step < b.step; });
    std::vector<StepRow>& out = m.ranks[rank];
    for (const StepRow& r : list) {
      if (!out.empty() && out.back().step == r.step) {
        out.back() = r;
      } else {
        out.push_back(r);
      }
    }
  }
  return m;
}

// ----------------------------------------------------------------------------------------------------
// summary.json

struct RankStraggler {
  double vs_fastest_max = kNaN;
  double windows = 0;  // windows in which the rank was a straggler
};

struct Summary {
  bool present = false;
  std::string job, kind, outcome, error, version;
  std::optional<double> workers, exit_code, failed_rank, wall_seconds, straggler_factor, window_steps;
  std::map<int32_t, RankStraggler> stragglers;
};

Status GetString(const Json& obj, const char* key, const std::string& where, std::string* out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status();
  if (!it->is_string()) return BadDataError(StrCat(where, ": \"", key, "\" is not a string"));
  *out = it->get<std::string>();
  return Status();
}

Status GetNumber(const Json& obj, const char* key, const std::string& where, std::optional<double>* out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status();  // FormatJson writes a NaN as null
  if (!it->is_number()) return BadDataError(StrCat(where, ": \"", key, "\" is not a number"));
  *out = it->get<double>();
  return Status();
}

Result<Summary> ReadSummary(const std::string& path) {
  Summary s;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return s;
  TESSEL_ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  TESSEL_ASSIGN_OR_RETURN(const Json doc, ParseJson(text, path));
  if (!doc.is_object()) return BadDataError(StrCat(path, ": not a JSON object"));
  s.present = true;
  TESSEL_RETURN_IF_ERROR(GetString(doc, "job", path, &s.job));
  TESSEL_RETURN_IF_ERROR(GetString(doc, "kind", path, &s.kind));
  TESSEL_RETURN_IF_ERROR(GetString(doc, "outcome", path, &s.outcome));
  TESSEL_RETURN_IF_ERROR(GetString(doc, "error", path, &s.error));
  TESSEL_RETURN_IF_ERROR(GetString(doc, "version", path, &s.version));
  TESSEL_RETURN_IF_ERROR(GetNumber(doc, "workers", path, &s.workers));
  TESSEL_RETURN_IF_ERROR(GetNumber(doc, "exit_code", path, &s.exit_code));
  TESSEL_RETURN_IF_ERROR(GetNumber(doc, "failed_rank", path, &s.failed_rank));
  TESSEL_RETURN_IF_ERROR(GetNumber(doc, "wall_seconds", path, &s.wall_seconds));
  const auto st = doc.find("stragglers");
  if (st == doc.end() || st->is_null()) return s;
  const std::string where = path + ": stragglers";
  if (!st->is_object()) return BadDataError(StrCat(where, " is not an object"));
  TESSEL_RETURN_IF_ERROR(GetNumber(*st, "factor", where, &s.straggler_factor));
  TESSEL_RETURN_IF_ERROR(GetNumber(*st, "window_steps", where, &s.window_steps));
  const auto ranks = st->find("ranks");
  if (ranks == st->end() || ranks->is_null()) return s;
  if (!ranks->is_object()) return BadDataError(StrCat(where, ": \"ranks\" is not an object"));
  for (const auto& [key, value] : ranks->items()) {
    int64_t rank = 0;
    if (!ParseInteger(key, &rank) || rank < 0 || rank > std::numeric_limits<int32_t>::max()) {
      return BadDataError(StrCat(where, ": ranks: '", key, "' is not a rank"));
    }
    const std::string rank_where = StrCat(where, ": ranks: ", key);
    if (!value.is_object()) return BadDataError(StrCat(rank_where, " is not an object"));
    std::optional<double> max, windows;
    TESSEL_RETURN_IF_ERROR(GetNumber(value, "vs_fastest_max", rank_where, &max));
    TESSEL_RETURN_IF_ERROR(GetNumber(value, "straggler_windows", rank_where, &windows));
    RankStraggler& r = s.stragglers[static_cast<int32_t>(rank)];
    r.vs_fastest_max = max.value_or(kNaN);
    r.windows = windows.value_or(0);
  }
  return s;
}

bool IsStraggler(const Summary& s, int32_t rank) {
  const auto it = s.stragglers.find(rank);
  return it != s.stragglers.end() && it->second.windows > 0;
}

// ----------------------------------------------------------------------------------------------------
// Text

std::string Printf(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "\u2014";
  if (seconds < 60) return Printf("%.3g s", seconds);
  if (seconds > 1e9) return FormatValue(seconds) + " s";
  const int64_t total = static_cast<int64_t>(std::llround(seconds));
  const int64_t h = total / 3600, min = total / 60 % 60, sec = total % 60;
  char buf[64];
  if (h > 0) {
    std::snprintf(buf, sizeof buf, "%lld h %02lld min", static_cast<long long>(h), static_cast<long long>(min));
  } else {
    std::snprintf(buf, sizeof buf, "%lld min %02lld s", static_cast<long long>(min), static_cast<long long>(sec));
  }
  return buf;
}

double Median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) return kNaN;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2 == 1) return v[mid];
  return (v[mid] + *std::max_element(v.begin(), v.begin() + mid)) / 2;
}

// ----------------------------------------------------------------------------------------------------
// The page

// What the x axis counts: an rgnn job's step is an epoch.
std::string StepUnit(const Summary& s) { return s.kind == "rgnn" ? "epoch" : "step"; }

std::string SampleUnit(const Summary& s) {
  if (s.kind == "rgnn") return "nodes";
  if (s.kind == "llm") return "tokens";
  return "samples";
}

std::string RankLabel(int32_t rank, const Summary& s) {
  return StrCat("rank ", rank, IsStraggler(s, rank) ? " (straggler)" : "");
}

// One point per row of `rows`: f(row), NaN when it cannot be computed.
template <typename F>
std::vector<Point> PointsOf(const std::vector<StepRow>& rows, F f) {
  std::vector<Point> out;
  out.reserve(rows.size());
  for (const StepRow& r : rows) out.push_back({static_cast<double>(r.step), f(r)});
  return out;
}

ChartSpec LossChart(const Metrics& m, const Summary& s) {
  ChartSpec c{.id = "loss",
              .title = StrCat("Training loss per ", StepUnit(s), ", and validation loss where it was measured"),
              .x_title = StepUnit(s),
              .y_title = "loss",
              .y_range = YRange::kData};
  if (m.ranks.empty()) return c;
  // Every rank reports the same loss; the lowest rank's rows stand for all.
  const auto& [rank, rows] = *m.ranks.begin();
  c.series.push_back({.label = StrCat("training loss (rank ", rank, ")"),
                      .color = kPalette[0],
                      .width = 2,
                      .points = PointsOf(rows, [](const StepRow& r) { return r.v[kLoss]; })});
  for (const auto& [vrank, vrows] : m.ranks) {
    std::vector<Point> val = PointsOf(vrows, [](const StepRow& r) { return r.v[kValLoss]; });
    if (std::none_of(val.begin(), val.end(), [](const Point& p) { return std::isfinite(p.y); })) continue;
    c.series.push_back({.label = StrCat("validation loss (rank ", vrank, ")"),
                        .color = kPalette[1],
                        .stroke = Stroke::kDots,
                        .points = std::move(val)});
    break;
  }
  return c;
}

ChartSpec StepTimeChart(const Metrics& m, const Summary& s) {
  ChartSpec c{.id = "step-time",
              .title = StrCat("Time per ", StepUnit(s), " by rank (solid: wall time, dashed: compute time)"),
              .x_title = StepUnit(s),
              .y_title = StrCat(StepUnit(s), " time (ms)")};
  std::vector<Series> stragglers;
  size_t index = 0;
  for (const auto& [rank, rows] : m.ranks) {
    const bool straggler = IsStraggler(s, rank);
    const std::string color = straggler ? kStragglerColor : RankColor(index);
    ++index;  // a rank keeps its colour from chart to chart
    auto& into = straggler ? stragglers : c.series;
    into.push_back({.label = StrCat(RankLabel(rank, s), " wall"),
                    .color = color,
                    .width = straggler ? 3.5 : 1.75,
                    .points = PointsOf(rows, [](const StepRow& r) { return r.v[kStepSeconds] * 1e3; })});
    into.push_back({.label = StrCat(RankLabel(rank, s), " compute"),
                    .color = color,
                    .width = straggler ? 2.25 : 1.25,
                    .stroke = Stroke::kDashed,
                    .points = PointsOf(rows, [](const StepRow& r) { return r.v[kComputeSeconds] * 1e3; })});
  }
  // Stragglers last, so that they are drawn on top.
  for (Series& st : stragglers) c.series.push_back(std::move(st));
  return c;
}

// The waits on peers per rank, by what the rank waited in: a line per rank and kind that has any (solid
// allreduce, dashed alltoall, dotted p2p).
ChartSpec WaitChart(const Metrics& m, const Summary& s) {
  ChartSpec c{.id = "waits",
              .title = StrCat("Time waiting on peers per ", StepUnit(s),
                              " by rank and kind (solid: allreduce, dashed: alltoall, dots: p2p)"),
              .x_title = StepUnit(s),
              .y_title = StrCat("wait per ", StepUnit(s), " (ms)")};
  const std::tuple<const char*, Col, Stroke> kinds[] = {{"allreduce", kWaitAllreduce, Stroke::kSolid},
                                                        {"alltoall", kWaitAlltoall, Stroke::kDashed},
                                                        {"p2p", kWaitP2p, Stroke::kDots}};
  size_t index = 0;
  for (const auto& [rank, rows] : m.ranks) {
    const std::string color = IsStraggler(s, rank) ? kStragglerColor : RankColor(index);
    ++index;
    for (const auto& [kind, col, stroke] : kinds) {
      bool any = false;
      for (const StepRow& r : rows) any = any || (std::isfinite(r.v[col]) && r.v[col] > 0);
      if (!any) continue;  // the job never waits in this kind (a full-graph job has no p2p)
      c.series.push_back({.label = StrCat(RankLabel(rank, s), " ", kind),
                          .color = color,
                          .width = 1.5,
                          .stroke = stroke,
                          .points = PointsOf(rows, [col = col](const StepRow& r) { return r.v[col] * 1e3; })});
    }
  }
  return c;
}

ChartSpec ThroughputChart(const Metrics& m, const Summary& s) {
  const std::string unit = SampleUnit(s) + "/s";
  ChartSpec c{.id = "throughput",
              .title = StrCat("Throughput (", SampleUnit(s), " per second of ", StepUnit(s), " time)"),
              .x_title = StepUnit(s),
              .y_title = StrCat("throughput (", unit, ")")};
  if (m.ranks.empty()) return c;
  const auto& [rank, rows] = *m.ranks.begin();
  c.series.push_back({.label = StrCat(unit, " (rank ", rank, ")"),
                      .color = kPalette[2],
                      .width = 2,
                      .points = PointsOf(rows, [](const StepRow& r) {
                        return r.v[kStepSeconds] > 0 ? r.v[kSamples] / r.v[kStepSeconds] : kNaN;
                      })});
  return c;
}

ChartSpec BandwidthChart(const Metrics& m, const Summary& s) {
  ChartSpec c{.id = "bandwidth",
              .title = "Data moved per second, summed over ranks (1 MB = 10^6 bytes)",
              .x_title = StepUnit(s),
              .y_title = "bandwidth (MB/s)"};
  struct Flow {
    const char* label;
    std::vector<Col> cols;  // summed
  };
  const Flow flows[] = {{"gather (local + remote)", {kGatherLocalBytes, kGatherRemoteBytes}},
                        {"halo sent", {kHaloSentBytes}},
                        {"pipeline sent", {kPipelineSentBytes}},
                        {"spill write", {kSpillWrittenBytes}},
                        {"spill read", {kSpillReadBytes}}};
  size_t index = 0;
  for (const Flow& f : flows) {
    std::map<int64_t, double> per_step;  // MB/s, summed over the ranks that have the figure
    bool any = false;
    for (const auto& [rank, rows] : m.ranks) {
      for (const StepRow& r : rows) {
        double bytes = kNaN;
        for (Col col : f.cols) {
          if (std::isfinite(r.v[col])) bytes = (std::isnan(bytes) ? 0 : bytes) + r.v[col];
        }
        auto [it, inserted] = per_step.try_emplace(r.step, kNaN);
        if (!std::isfinite(bytes) || !(r.v[kStepSeconds] > 0)) continue;
        const double rate = bytes / r.v[kStepSeconds] / 1e6;
        it->second = (std::isnan(it->second) ? 0 : it->second) + rate;
        any = any || rate != 0;
      }
    }
    const std::string color = RankColor(index++);
    if (!any) continue;  // all zero or empty
    Series series{.label = f.label, .color = color};
    for (const auto& [step, rate] : per_step) series.points.push_back({static_cast<double>(step), rate});
    c.series.push_back(std::move(series));
  }
  return c;
}

ChartSpec MemoryChart(const Metrics& m, const Summary& s) {
  ChartSpec c{
      .id = "memory",
      .title = StrCat("Memory per rank at the end of each ", StepUnit(s), " (solid: resident, dashed: activations)"),
      .x_title = StepUnit(s),
      .y_title = "memory (MiB)"};
  size_t index = 0;
  for (const auto& [rank, rows] : m.ranks) {
    const std::string color = IsStraggler(s, rank) ? kStragglerColor : RankColor(index);
    ++index;
    c.series.push_back({.label = StrCat(RankLabel(rank, s), " resident"),
                        .color = color,
                        .points = PointsOf(rows, [](const StepRow& r) { return r.v[kResidentBytes] / kMiB; })});
    c.series.push_back({.label = StrCat(RankLabel(rank, s), " activations"),
                        .color = color,
                        .width = 1.5,
                        .stroke = Stroke::kDashed,
                        .points = PointsOf(rows, [](const StepRow& r) { return r.v[kActivationBytes] / kMiB; })});
  }
  return c;
}

// Memory by kind (metrics.csv's memory_*_bytes) of the lowest rank: one line per kind it has.
ChartSpec MemoryByKindChart(const Metrics& m, const Summary& s) {
  ChartSpec c{.id = "memory-kind",
              .title = StrCat("Memory by kind at the end of each ", StepUnit(s), " (the lowest rank)"),
              .x_title = StepUnit(s),
              .y_title = "memory (MiB)"};
  if (m.ranks.empty()) return c;
  const auto& [rank, rows] = *m.ranks.begin();
  const std::pair<const char*, Col> kinds[] = {{"weights", kMemWeights},     {"gradients", kMemGradients},
                                               {"optimizer", kMemOptimizer}, {"activations", kMemActivations},
                                               {"workspace", kMemWorkspace}, {"graph", kMemGraph}};
  size_t index = 0;
  for (const auto& [kind, col] : kinds) {
    const std::string color = RankColor(index++);
    bool any = false;
    for (const StepRow& r : rows) any = any || std::isfinite(r.v[col]);
    if (!any) continue;  // the executor has none of this kind
    c.series.push_back({.label = StrCat(kind, " (", RankLabel(rank, s), ")"),
                        .color = color,
                        .points = PointsOf(rows, [col = col](const StepRow& r) { return r.v[col] / kMiB; })});
  }
  return c;
}

std::string RankTable(const Metrics& m, const Summary& s) {
  std::string t =
      "<table class=\"ranks\">\n<thead><tr><th>rank</th><th>rows</th><th>median step (ms)</th>"
      "<th>median compute (ms)</th><th>median wait (ms)</th><th>straggler score (max vs fastest)</th>"
      "<th>straggler windows</th></tr></thead>\n<tbody>\n";
  for (const auto& [rank, rows] : m.ranks) {
    std::vector<double> step, compute, wait;
    for (const StepRow& r : rows) {
      step.push_back(r.v[kStepSeconds] * 1e3);
      compute.push_back(r.v[kComputeSeconds] * 1e3);
      wait.push_back(r.v[kPeerWaitSeconds] * 1e3);
    }
    const auto st = s.stragglers.find(rank);
    const bool straggler = IsStraggler(s, rank);
    std::string score = "\u2014", windows = "\u2014";
    if (st != s.stragglers.end()) {
      if (std::isfinite(st->second.vs_fastest_max)) score = Printf("%.2f\u00d7", st->second.vs_fastest_max);
      windows = FormatValue(st->second.windows);
    }
    t += StrCat("<tr", straggler ? " class=\"straggler\"" : "", "><td>", rank,
                straggler ? " <span class=\"tag\">straggler</span>" : "", "</td><td class=\"num\">", rows.size(),
                "</td><td class=\"num\">", FormatValue(Median(step)), "</td><td class=\"num\">",
                FormatValue(Median(compute)), "</td><td class=\"num\">", FormatValue(Median(wait)),
                "</td><td class=\"num\">", score, "</td><td class=\"num\">", windows, "</td></tr>\n");
  }
  t += "</tbody>\n</table>\n";
  if (!s.stragglers.empty() && s.straggler_factor) {
    t += StrCat("<p class=\"note\">A rank is a straggler in a window of ",
                s.window_steps ? FormatValue(*s.window_steps) : std::string("?"), " ", StepUnit(s),
                "s when its median compute time is ", FormatValue(*s.straggler_factor),
                "\u00d7 the fastest rank&#39;s or more (summary.json <code>stragglers</code>).</p>\n");
  } else if (!s.present) {
    t += "<p class=\"note\">No straggler scores: they come from summary.json, which this run lacks.</p>\n";
  }
  return t;
}

constexpr const char* kStyle = R"css(
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222;
       background: #fff; margin: 0 auto; padding: 16px 24px 40px; max-width: 1140px; }
h1 { font-size: 22px; margin: 8px 0 12px; word-break: break-all; }
h2 { font-size: 17px; margin: 28px 0 6px; }
.facts { display: grid; grid-template-columns: max-content auto max-content auto; gap: 4px 14px; font-size: 14px; }
.facts dt { color: #666; }
.facts dd { margin: 0; font-weight: 600; }
.outcome { display: inline-block; padding: 1px 8px; border-radius: 4px; color: #fff; }
.outcome-done { background: #2e7d32; } .outcome-failed { background: #c62828; }
.outcome-stopped { background: #ef6c00; } .outcome-unknown { background: #757575; }
.failure { border: 2px solid #c62828; background: #fdecea; padding: 10px 14px; margin: 14px 0; border-radius: 4px; }
.failure h2 { margin: 0 0 6px; color: #c62828; }
.failure pre { white-space: pre-wrap; word-break: break-word; margin: 6px 0; font-size: 13px; }
.warning { border: 1px solid #ef6c00; background: #fff3e0; padding: 8px 14px; margin: 12px 0; border-radius: 4px;
           font-size: 14px; }
svg.chart { display: block; max-width: 100%; height: auto; font-size: 12px; margin: 6px 0; }
svg.chart .chart-title { font-size: 15px; font-weight: 600; fill: #222; }
svg.chart .grid line { stroke: #e6e6e6; stroke-width: 1; }
svg.chart .axis line { stroke: #444; stroke-width: 1; }
svg.chart .tick { fill: #444; }
svg.chart .axis-title { fill: #222; font-size: 13px; }
svg.chart .no-data { fill: #888; font-size: 16px; }
svg.chart .legend text { fill: #222; }
table.ranks { border-collapse: collapse; font-size: 13px; margin: 4px 0 8px 84px; }
table.ranks th, table.ranks td { border: 1px solid #ddd; padding: 4px 10px; }
table.ranks th { background: #f4f4f4; text-align: left; }
table.ranks td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.ranks tr.straggler td { background: #fdecea; }
.tag { color: #fff; background: #d62728; border-radius: 3px; padding: 0 5px; font-size: 11px; }
.note { color: #555; font-size: 13px; margin-left: 84px; }
footer { color: #888; font-size: 12px; margin-top: 32px; }
)css";

std::string Fact(std::string_view name, std::string_view value_html) {
  return StrCat("<dt>", name, "</dt><dd>", value_html, "</dd>");
}

std::string RenderPage(const std::string& run_dir, const Metrics& m, const Summary& s) {
  std::filesystem::path dir = std::filesystem::path(run_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "runs/x/"
  const std::string job = !s.job.empty() ? s.job : dir.filename().string();
  const std::string outcome = s.outcome.empty() ? "unknown" : s.outcome;
  const bool known_outcome = outcome == "done" || outcome == "failed" || outcome == "stopped";

  std::string h = StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", Escape(job),
                         " \u2014 tessel report</title>\n<style>", kStyle, "</style>\n</head>\n<body>\n");
  h += StrCat("<h1>", Escape(job), "</h1>\n<dl class=\"facts\">");
  h += Fact("outcome", StrCat("<span class=\"outcome outcome-", known_outcome ? outcome : "unknown", "\">",
                              Escape(outcome), "</span>"));
  h += Fact("kind", s.kind.empty() ? "\u2014" : Escape(s.kind));
  const std::string workers = s.workers ? FormatValue(*s.workers) : StrCat(m.ranks.size(), " (ranks in metrics.csv)");
  h += Fact("workers", Escape(workers));
  std::string wall = s.wall_seconds ? FormatDuration(*s.wall_seconds) : "\u2014";
  if (!s.wall_seconds) {
    double first = INFINITY, last = -INFINITY;
    for (const auto& [rank, rows] : m.ranks) {
      for (const StepRow& r : rows) {
        if (!std::isfinite(r.v[kUnixSeconds])) continue;
        first = std::min(first, r.v[kUnixSeconds] - (std::isfinite(r.v[kStepSeconds]) ? r.v[kStepSeconds] : 0));
        last = std::max(last, r.v[kUnixSeconds]);
      }
    }
    if (last >= first) wall = StrCat("\u2248 ", FormatDuration(last - first), " of ", StepUnit(s), "s (metrics.csv)");
  }
  h += Fact("wall time", Escape(wall));
  std::string steps = StrCat(m.steps.size());
  if (!m.steps.empty()) steps += StrCat(" (", *m.steps.begin(), "\u2013", *m.steps.rbegin(), ")");
  h += Fact(StepUnit(s) + "s", Escape(steps));
  h += Fact("version", s.version.empty() ? "\u2014" : Escape(s.version));
  h += "</dl>\n";

  if (outcome == "failed") {
    h += "<div class=\"failure\"><h2>The run failed</h2>";
    if (!s.error.empty()) h += StrCat("<pre class=\"error\">", Escape(s.error), "</pre>");
    h += "<dl class=\"facts\">";
    h += Fact("exit code", s.exit_code ? Escape(FormatValue(*s.exit_code)) : "\u2014");
    h += Fact("failed rank", s.failed_rank ? Escape(FormatValue(*s.failed_rank)) : "\u2014");
    h += "</dl></div>\n";
  }
  if (!s.present) {
    h += StrCat("<div class=\"warning\">summary.json is missing from ", Escape(run_dir),
                ": the run may still be going, or was killed before it could write it. This report is drawn from "
                "metrics.csv alone: no outcome, wall time or straggler scores.</div>\n");
  }
  if (m.skipped_truncated_line) {
    h += "<div class=\"warning\">The last line of metrics.csv was cut short (the run was killed while writing "
         "it) and is left out.</div>\n";
  }
  if (m.ranks.empty()) h += "<div class=\"warning\">metrics.csv has no rows: no step finished.</div>\n";

  h += "<h2>Loss</h2>\n" + RenderChart(LossChart(m, s));
  h += "<h2>Step time</h2>\n" + RenderChart(StepTimeChart(m, s)) + RankTable(m, s);
  h += "<h2>Waiting on peers</h2>\n" + RenderChart(WaitChart(m, s));
  h += "<h2>Throughput</h2>\n" + RenderChart(ThroughputChart(m, s));
  h += "<h2>Bandwidth</h2>\n" + RenderChart(BandwidthChart(m, s));
  h += "<h2>Memory</h2>\n" + RenderChart(MemoryChart(m, s)) + RenderChart(MemoryByKindChart(m, s));
  h += StrCat("<footer>tessel report of ", Escape(run_dir), " (metrics.csv", s.present ? ", summary.json" : "",
              ")</footer>\n</body>\n</html>\n");
  return h;
}

}  // namespace

Result<std::string> WriteRunReport(const std::string& run_dir, const std::string& out_path) {
  const std::filesystem::path dir(run_dir);
  const std::string csv_path = (dir / "metrics.csv").string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(csv_path, ec)) {
    return UsageError(StrCat(csv_path, ": no such file; runs write it since Tessel ", kMetricsCsvSince,
                             ", so a run of an earlier version has none (or ", run_dir, " is not a run directory)"));
  }
  TESSEL_ASSIGN_OR_RETURN(const Metrics metrics, ReadMetrics(csv_path));
  TESSEL_ASSIGN_OR_RETURN(const Summary summary, ReadSummary((dir / "summary.json").string()));
  const std::string path = out_path.empty() ? (dir / "report.html").string() : out_path;
  TESSEL_RETURN_IF_ERROR(WriteFileAtomically(path, RenderPage(run_dir, metrics, summary)));
  return path;
}

}  // namespace tessel::orchestrator

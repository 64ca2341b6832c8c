#include "monitoring/straggler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace tessel::monitoring {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

}  // namespace

StragglerTracker::StragglerTracker(std::vector<int32_t> worker_ranks, double factor, int32_t window)
    : factor_(factor), window_(std::max<int32_t>(1, window)) {
  for (int32_t r : worker_ranks) rows_[r];
}

void StragglerTracker::Add(int32_t worker_rank, double compute_seconds) {
  rows_[worker_rank].seconds.push_back(std::max(0.0, compute_seconds));
}

bool StragglerTracker::TakeWindow(Window* out) {
  const auto begin = static_cast<size_t>(windows_taken_ * window_);
  const size_t end = begin + static_cast<size_t>(window_);
  if (rows_.empty()) return false;
  for (const auto& [rank, row] : rows_) {
    if (row.seconds.size() < end) return false;
  }
  Window w;
  w.first = static_cast<int64_t>(begin) + 1;
  w.last = static_cast<int64_t>(end);
  double fastest = std::numeric_limits<double>::infinity();
  for (auto& [rank, row] : rows_) {
    const auto first = row.seconds.begin();
    Score s;
    s.worker_rank = rank;
    s.median_seconds = Median({first + static_cast<std::ptrdiff_t>(begin), first + static_cast<std::ptrdiff_t>(end)});
    s.vs_own_median =
        begin == 0 ? std::numeric_limits<double>::quiet_NaN()
                   : s.median_seconds / std::max(1e-12, Median({first, first + static_cast<std::ptrdiff_t>(begin)}));
    if (s.median_seconds < fastest) fastest = s.median_seconds, w.fastest_rank = rank;
    w.scores.push_back(s);
  }
  for (Score& s : w.scores) {
    s.vs_fastest = s.median_seconds / std::max(1e-12, fastest);
    s.straggler = s.vs_fastest >= factor_;
    Row& row = rows_[s.worker_rank];
    row.last_vs_fastest = s.vs_fastest;
    row.max_vs_fastest = std::max(row.max_vs_fastest, s.vs_fastest);
    if (s.straggler) ++row.straggler_windows;
  }
  ++windows_taken_;
  *out = std::move(w);
  return true;
}

Record StragglerTracker::Summary() const {
  Record out;
  Set(out, "factor", factor_);
  Set(out, "window_steps", static_cast<int64_t>(window_));
  Set(out, "windows", windows_taken_);
  Record ranks;
  for (const auto& [rank, row] : rows_) {
    Record r;
    Set(r, "median_compute_seconds", row.seconds.empty() ? 0.0 : Median(row.seconds));
    Set(r, "vs_fastest_last", row.last_vs_fastest);
    Set(r, "vs_fastest_max", row.max_vs_fastest);
    Set(r, "straggler_windows", row.straggler_windows);
    Set(ranks, std::to_string(rank), std::move(r));
  }
  Set(out, "ranks", std::move(ranks));
  return out;
}

}  // namespace tessel::monitoring

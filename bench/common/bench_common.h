// What the benchmark binaries of bench/ share: timing, medians, rounding for the JSON rows and integer
// options (bench_json.h writes the rows file). Header-only and free of Tessel's libraries, so that
// bench/limits, which links none, uses it too; included as "bench/common/bench_common.h".
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace tessel::bench {

using Clock = std::chrono::steady_clock;

// Seconds from `t0` to now.
inline double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The median (the mean of the middle two for an even count); 0 for none.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// `v` rounded to 1/scale, for the JSON rows.
inline double Round(double v, double scale = 1000) { return std::round(v * scale) / scale; }

// A whole decimal number in [lo, hi], all of `text`.
inline bool ParseInt(const char* text, int64_t lo, int64_t hi, int64_t* out) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace tessel::bench

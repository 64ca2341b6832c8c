// The rule every reader of node features applies (DESIGN.md "Graph file"): features are finite. A NaN or
// an infinity in an input row would otherwise train silently into NaN losses or weights.
// Thread safety: plain functions. Failure: NonFiniteFeatureError builds the kBadData that names the row.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "core/logging.h"
#include "core/status.h"

namespace tessel::storage {

// The index of the first NaN or +-Inf in data[0, n), or -1 when every value is finite. One pass: each
// block is tested with a branch-free exponent check (all exponent bits set = NaN or Inf), which the
// compiler vectorises, and only a block that holds a culprit is searched again.
inline int64_t FirstNonFinite(const float* data, int64_t n) {
  constexpr int64_t kBlock = 512;
  constexpr uint32_t kExponent = 0x7f800000u;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    uint32_t any = 0;
    for (int64_t i = start; i < end; ++i) {
      any |= static_cast<uint32_t>((std::bit_cast<uint32_t>(data[i]) & kExponent) == kExponent);
    }
    if (any != 0) {
      for (int64_t i = start; i < end; ++i) {
        if (!std::isfinite(data[i])) return i;
      }
    }
  }
  return -1;
}

// "<where>: node <type>:<local> (global id <global>) column <column> is NaN; node features must be finite".
// `where` names the dataset, e.g. "g.h5: /nodes/paper/features".
inline Status NonFiniteFeatureError(std::string_view where, std::string_view type, int64_t local, int64_t global,
                                    int64_t column, float value) {
  const char* what = std::isnan(value) ? "NaN" : (value > 0 ? "+Inf" : "-Inf");
  return BadDataError(StrCat(where, ": node ", type, ":", local, " (global id ", global, ") column ", column, " is ",
                             what, "; node features must be finite"));
}

}  // namespace tessel::storage

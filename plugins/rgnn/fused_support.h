// Helpers shared by the fused CPU kernels (rgcn_fused_cpu.cc, rgat_*_cpu.cc, hgt_cpu.cc): tile sizes, the
// fixed grouping of blocks for gradient partial sums, row prefetches. (The row loops are
// plugins/common/row_ops.h.)
// Thread safety: pure functions over caller-owned memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tessel::kernels::rgnn {

// Rows (segments or pairs) per GEMM tile: A tile of 128 x 128 floats is 64 KiB, in L2.
inline constexpr int64_t kTileRows = 128;

// How many groups the source blocks form for weight-gradient partial sums. Each group owns one partial
// copy of the weight gradient, summed in group order at the end, so the result depends on the shapes
// only, never on the number of threads. At most 8 groups, and at most `budget_bytes` of partials.
inline int64_t GradientGroups(int64_t num_blocks, int64_t partial_bytes, int64_t budget_bytes = int64_t{64} << 20) {
  const int64_t by_memory = partial_bytes > 0 ? std::max<int64_t>(1, budget_bytes / partial_bytes) : 8;
  return std::max<int64_t>(1, std::min({num_blocks, int64_t{8}, by_memory}));
}

// Blocks [GroupBegin(g), GroupBegin(g + 1)) belong to group g of `groups`.
inline int64_t GroupBegin(int64_t g, int64_t groups, int64_t num_blocks) { return g * num_blocks / groups; }

// Edges ahead whose gathered rows the per-edge loops prefetch: the gathers (X[src], dOut[dst], K and V
// rows, table rows) are random reads, and without this the loops wait on them.
inline constexpr int64_t kPrefetchAhead = 4;

// Asks for the cache lines of a row of n values that a loop will read soon.
template <typename T>
inline void PrefetchRow(const T* row, int64_t n) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t b = 0; b < n * static_cast<int64_t>(sizeof(T)); b += 64) __builtin_prefetch(p + b);
}

template <typename T>
inline void Zero(int64_t n, T* p) {
  std::memset(static_cast<void*>(p), 0, static_cast<size_t>(n) * sizeof(T));
}

}  // namespace tessel::kernels::rgnn

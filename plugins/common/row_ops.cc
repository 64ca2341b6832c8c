// Built with -ffp-contract=off (CMakeLists.txt): no clone fuses a multiply and an add that another does not.
#include "row_ops.h"

namespace tessel::kernels {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TESSEL_NO_MULTIVERSION)
#define TESSEL_ROW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TESSEL_ROW_CLONES
#endif
// The bodies below are templates inlined into each clone, so each is compiled for the clone's target.
#define TESSEL_ROW_INLINE inline __attribute__((always_inline))

// Columns summed per pass: 256 bytes (4 AVX-512 registers) of accumulators.
template <typename T>
inline constexpr int64_t kChunk = 256 / sizeof(T);
// Edges ahead whose rows are prefetched.
inline constexpr int64_t kAhead = 8;

template <typename T>
TESSEL_ROW_INLINE void Prefetch(const T* row, int64_t width) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t b = 0; b < width * static_cast<int64_t>(sizeof(T)); b += 64) __builtin_prefetch(p + b);
}

// Columns [c0, c0 + W) of a gather: `row_ptr(i)` is item i's row (from column 0), `weight(i)` its factor.
template <typename T, int64_t W, bool kWeighted, typename RowPtr, typename Weight>
TESSEL_ROW_INLINE void GatherColumns(int64_t n, int64_t c0, int64_t width, RowPtr row_ptr, Weight weight, T* acc) {
  for (int64_t c = 0; c < (W > 0 ? W : width); ++c) acc[c] = T(0);
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) Prefetch(row_ptr(i + kAhead) + c0, W > 0 ? W : width);
    const T* r = row_ptr(i) + c0;
    if constexpr (kWeighted) {
      const T a = weight(i);
      for (int64_t c = 0; c < (W > 0 ? W : width); ++c) acc[c] += a * r[c];
    } else {
      for (int64_t c = 0; c < (W > 0 ? W : width); ++c) acc[c] += r[c];
    }
  }
}

template <typename T, bool kWeighted, typename RowPtr, typename Weight>
TESSEL_ROW_INLINE void Gather(int64_t k, int64_t n, RowPtr row_ptr, Weight weight, T scale, T* out) {
  alignas(64) T acc[kChunk<T>];
  int64_t c0 = 0;
  for (; c0 + kChunk<T> <= k; c0 += kChunk<T>) {
    GatherColumns<T, kChunk<T>, kWeighted>(n, c0, kChunk<T>, row_ptr, weight, acc);
    for (int64_t c = 0; c < kChunk<T>; ++c) out[c0 + c] = scale * acc[c];
  }
  if (c0 < k) {
    const int64_t width = k - c0;
    GatherColumns<T, 0, kWeighted>(n, c0, width, row_ptr, weight, acc);
    for (int64_t c = 0; c < width; ++c) out[c0 + c] = scale * acc[c];
  }
}

template <typename T>
TESSEL_ROW_INLINE void GatherSumImpl(const T* x, int64_t k, const int32_t* idx, const int64_t* map, int64_t n, T scale,
                                     T* out) {
  const auto none = [](int64_t) { return T(1); };
  if (map == nullptr) {
    Gather<T, false>(
        k, n, [&](int64_t i) { return x + static_cast<int64_t>(idx[i]) * k; }, none, scale, out);
  } else {
    Gather<T, false>(
        k, n, [&](int64_t i) { return x + map[idx[i]] * k; }, none, scale, out);
  }
}

template <typename T>
TESSEL_ROW_INLINE void GatherSegmentsImpl(const T* x, int64_t k, const int32_t* seg, int64_t n, const int32_t* row_of,
                                          const T* coef, T* out) {
  Gather<T, true>(
      k, n, [&](int64_t i) { return x + static_cast<int64_t>(row_of[seg[i]]) * k; },
      [&](int64_t i) { return coef[seg[i]]; }, T(1), out);
}

template <typename T>
TESSEL_ROW_INLINE T DotImpl(int64_t n, const T* __restrict x, const T* __restrict y) {
  T p[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) p[j] += x[i + j] * y[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) p[j] += x[i] * y[i];
  T sum = p[0];
  for (int j = 1; j < 8; ++j) sum += p[j];
  return sum;
}

}  // namespace

TESSEL_ROW_CLONES void GatherSum(const float* x, int64_t k, const int32_t* idx, const int64_t* map, int64_t n,
                                 float scale, float* out) {
  GatherSumImpl(x, k, idx, map, n, scale, out);
}
TESSEL_ROW_CLONES void GatherSum(const double* x, int64_t k, const int32_t* idx, const int64_t* map, int64_t n,
                                 double scale, double* out) {
  GatherSumImpl(x, k, idx, map, n, scale, out);
}

TESSEL_ROW_CLONES void GatherSegments(const float* x, int64_t k, const int32_t* seg, int64_t n, const int32_t* row_of,
                                      const float* coef, float* out) {
  GatherSegmentsImpl(x, k, seg, n, row_of, coef, out);
}
TESSEL_ROW_CLONES void GatherSegments(const double* x, int64_t k, const int32_t* seg, int64_t n, const int32_t* row_of,
                                      const double* coef, double* out) {
  GatherSegmentsImpl(x, k, seg, n, row_of, coef, out);
}

TESSEL_ROW_CLONES void AddRow(int64_t n, const float* __restrict x, float* __restrict y) {
  for (int64_t c = 0; c < n; ++c) y[c] += x[c];
}
TESSEL_ROW_CLONES void AddRow(int64_t n, const double* __restrict x, double* __restrict y) {
  for (int64_t c = 0; c < n; ++c) y[c] += x[c];
}

TESSEL_ROW_CLONES void AxpyRow(int64_t n, float a, const float* __restrict x, float* __restrict y) {
  for (int64_t c = 0; c < n; ++c) y[c] += a * x[c];
}
TESSEL_ROW_CLONES void AxpyRow(int64_t n, double a, const double* __restrict x, double* __restrict y) {
  for (int64_t c = 0; c < n; ++c) y[c] += a * x[c];
}

TESSEL_ROW_CLONES float DotRow(int64_t n, const float* x, const float* y) { return DotImpl(n, x, y); }
TESSEL_ROW_CLONES double DotRow(int64_t n, const double* x, const double* y) { return DotImpl(n, x, y); }

}  // namespace tessel::kernels

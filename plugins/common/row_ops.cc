// Built with -ffp-contract=off (CMakeLists.txt): no clone fuses a multiply and an add that another does not;
// and with -fno-math-errno, so that std::sqrt vectorises (the argument is never negative).
#include "row_ops.h"

#include <cmath>

#include "fast_exp.h"

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

// Item i's columns [c0, c0 + W) (W == 0: `width` columns): `row_ptr(e)` is edge e's row (from column
// 0), `weight(e)` its factor. The first chunk of an item prefetches whole rows kAhead edges on, up to
// `e_end` (the last edge of the run of items).
template <typename T, int64_t W, bool kWeighted, typename RowPtr, typename Weight>
TESSEL_ROW_INLINE void GatherColumns(int64_t e0, int64_t e1, int64_t e_end, int64_t k, int64_t c0, int64_t width,
                                     RowPtr row_ptr, Weight weight, T* acc) {
  const int64_t w = W > 0 ? W : width;
  for (int64_t c = 0; c < w; ++c) acc[c] = T(0);
  for (int64_t e = e0; e < e1; ++e) {
    if (c0 == 0 && e + kAhead < e_end) Prefetch(row_ptr(e + kAhead), k);
    const T* r = row_ptr(e) + c0;
    if constexpr (kWeighted) {
      const T a = weight(e);
      for (int64_t c = 0; c < w; ++c) acc[c] += a * r[c];
    } else {
      for (int64_t c = 0; c < w; ++c) acc[c] += r[c];
    }
  }
}

template <typename T, bool kWeighted, typename RowPtr, typename Weight>
TESSEL_ROW_INLINE void GatherItems(int64_t k, const int64_t* ptr, int64_t items, RowPtr row_ptr, Weight weight,
                                   const T* scale, T* out) {
  alignas(64) T acc[kChunk<T>];
  const int64_t e_end = items > 0 ? ptr[items] : 0;
  for (int64_t i = 0; i < items; ++i) {
    const T s = scale != nullptr ? scale[i] : T(1);
    T* o = out + i * k;
    int64_t c0 = 0;
    for (; c0 + kChunk<T> <= k; c0 += kChunk<T>) {
      GatherColumns<T, kChunk<T>, kWeighted>(ptr[i], ptr[i + 1], e_end, k, c0, kChunk<T>, row_ptr, weight, acc);
      for (int64_t c = 0; c < kChunk<T>; ++c) o[c0 + c] = s * acc[c];
    }
    if (c0 < k) {
      const int64_t width = k - c0;
      GatherColumns<T, 0, kWeighted>(ptr[i], ptr[i + 1], e_end, k, c0, width, row_ptr, weight, acc);
      for (int64_t c = 0; c < width; ++c) o[c0 + c] = s * acc[c];
    }
  }
}

template <typename T>
TESSEL_ROW_INLINE void GatherSumImpl(const T* x, int64_t k, const int64_t* ptr, int64_t items, const int32_t* idx,
                                     const int64_t* map, const T* scale, T* out) {
  const auto none = [](int64_t) { return T(1); };
  if (map == nullptr) {
    GatherItems<T, false>(
        k, ptr, items, [&](int64_t e) { return x + static_cast<int64_t>(idx[e]) * k; }, none, scale, out);
  } else {
    GatherItems<T, false>(
        k, ptr, items, [&](int64_t e) { return x + map[idx[e]] * k; }, none, scale, out);
  }
}

template <typename T>
TESSEL_ROW_INLINE void GatherSegmentsImpl(const T* x, int64_t k, const int64_t* ptr, int64_t items, const int32_t* seg,
                                          const int32_t* row_of, const T* coef, T* out) {
  GatherItems<T, true>(
      k, ptr, items, [&](int64_t e) { return x + static_cast<int64_t>(row_of[seg[e]]) * k; },
      [&](int64_t e) { return coef[seg[e]]; }, static_cast<const T*>(nullptr), out);
}

template <typename T>
TESSEL_ROW_INLINE void AdamImpl(int64_t n, T* __restrict p, const T* __restrict grad, T* __restrict m, T* __restrict v,
                                const AdamConstants<T>& c) {
  // The constants in registers (through `c` the compiler would reload them: T* may alias them).
  const T wd = c.weight_decay, b1c = c.one_minus_beta1, b2 = c.beta2, b2c = c.one_minus_beta2;
  const T step_size = c.step_size, bias2_sqrt = c.bias2_sqrt, eps = c.eps;
  const auto update = [&](int64_t i, T grad_i) {
    const T g = grad_i + wd * p[i];
    m[i] += b1c * (g - m[i]);
    v[i] = v[i] * b2 + b2c * g * g;
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bias2_sqrt + eps);
  };
  if (grad != nullptr) {
    for (int64_t i = 0; i < n; ++i) update(i, grad[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) update(i, T(0));
  }
}

// 8 lanes of T as one value (a 256-bit register on x86-64-v3/v4, two 128-bit ones on the baseline): the
// dot product's partial sums i mod 8, added lane by lane; unaligned loads through memcpy.
template <typename T>
struct Lanes8Of;
template <>
struct Lanes8Of<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct Lanes8Of<double> {
  typedef double type __attribute__((vector_size(64)));
};
template <typename T>
using Lanes8 = typename Lanes8Of<T>::type;

template <typename T>
TESSEL_ROW_INLINE T DotImpl(int64_t n, const T* __restrict x, const T* __restrict y) {
  Lanes8<T> acc = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Lanes8<T> a, b;
    __builtin_memcpy(&a, x + i, sizeof(a));
    __builtin_memcpy(&b, y + i, sizeof(b));
    acc += a * b;
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] += x[i] * y[i];
  T sum = acc[0];
  for (int j = 1; j < 8; ++j) sum += acc[j];
  return sum;
}

}  // namespace

TESSEL_ROW_CLONES void GatherSumItems(const float* x, int64_t k, const int64_t* ptr, int64_t items, const int32_t* idx,
                                      const int64_t* map, const float* scale, float* out) {
  GatherSumImpl(x, k, ptr, items, idx, map, scale, out);
}
TESSEL_ROW_CLONES void GatherSumItems(const double* x, int64_t k, const int64_t* ptr, int64_t items, const int32_t* idx,
                                      const int64_t* map, const double* scale, double* out) {
  GatherSumImpl(x, k, ptr, items, idx, map, scale, out);
}

TESSEL_ROW_CLONES void GatherSegmentItems(const float* x, int64_t k, const int64_t* ptr, int64_t items,
                                          const int32_t* seg, const int32_t* row_of, const float* coef, float* out) {
  GatherSegmentsImpl(x, k, ptr, items, seg, row_of, coef, out);
}
TESSEL_ROW_CLONES void GatherSegmentItems(const double* x, int64_t k, const int64_t* ptr, int64_t items,
                                          const int32_t* seg, const int32_t* row_of, const double* coef, double* out) {
  GatherSegmentsImpl(x, k, ptr, items, seg, row_of, coef, out);
}

namespace {
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

// sigmoid(2u) = 0.5 (1 + tanh(u)); exactly 0 once e^(-2u) would pass float's range (as tanh is -1 there).
template <typename T>
TESSEL_ROW_INLINE T Sigmoid2(T u) {
  const T s = T(1) / (T(1) + FastExp(T(-2) * u));
  return u < T(-40) ? T(0) : s;
}
template <typename T>
TESSEL_ROW_INLINE void GeluTanhImpl(int64_t n, const T* __restrict x, T* __restrict y) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T u = T(kSqrt2OverPi) * (v + T(kGeluCubic) * v * v * v);
    y[i] = v * Sigmoid2(u);
  }
}
template <typename T>
TESSEL_ROW_INLINE void GeluTanhBwdImpl(int64_t n, const T* __restrict dy, const T* __restrict x, T* __restrict dx) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T u = T(kSqrt2OverPi) * (v + T(kGeluCubic) * v * v * v);
    const T s = Sigmoid2(u);
    const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * v * v);
    dx[i] = dy[i] * (s + T(2) * v * s * (T(1) - s) * du);
  }
}
}  // namespace

TESSEL_ROW_CLONES void GeluTanhRow(int64_t n, const float* x, float* y) { GeluTanhImpl(n, x, y); }
TESSEL_ROW_CLONES void GeluTanhRow(int64_t n, const double* x, double* y) { GeluTanhImpl(n, x, y); }
TESSEL_ROW_CLONES void GeluTanhBwdRow(int64_t n, const float* dy, const float* x, float* dx) {
  GeluTanhBwdImpl(n, dy, x, dx);
}
TESSEL_ROW_CLONES void GeluTanhBwdRow(int64_t n, const double* dy, const double* x, double* dx) {
  GeluTanhBwdImpl(n, dy, x, dx);
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

TESSEL_ROW_CLONES void AdamSpan(int64_t n, float* p, const float* grad, float* m, float* v,
                                const AdamConstants<float>& c) {
  AdamImpl(n, p, grad, m, v, c);
}
TESSEL_ROW_CLONES void AdamSpan(int64_t n, double* p, const double* grad, double* m, double* v,
                                const AdamConstants<double>& c) {
  AdamImpl(n, p, grad, m, v, c);
}

}  // namespace tessel::kernels

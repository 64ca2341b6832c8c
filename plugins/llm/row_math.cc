// Built with -ffp-contract=off (CMakeLists.txt): no clone fuses a multiply and an add that another does not;
// and with -fno-math-errno, so that std::sqrt and std::exp need no errno path.
#include "row_math.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "fast_exp.h"

namespace tessel::kernels::llm {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TESSEL_NO_MULTIVERSION)
#define TESSEL_LLM_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TESSEL_LLM_CLONES
#endif
// The bodies below are templates inlined into each clone, so each is compiled for the clone's target.
#define TESSEL_LLM_INLINE inline __attribute__((always_inline))

// Partial sums per reduction: two AVX-512 registers' worth, enough to hide the adds' latency.
template <typename T>
inline constexpr int64_t kLanes = 128 / sizeof(T);

// sum over j < n of term(j), in kLanes partial sums added in order at the end.
template <typename T, typename Term>
TESSEL_LLM_INLINE T LaneSum(int64_t n, Term term) {
  constexpr int64_t L = kLanes<T>;
  T acc[L] = {};
  int64_t j = 0;
  for (; j + L <= n; j += L) {
    for (int64_t l = 0; l < L; ++l) acc[l] += term(j + l);
  }
  for (int64_t l = 0; j + l < n; ++l) acc[l] += term(j + l);
  T sum = T(0);
  for (int64_t l = 0; l < L; ++l) sum += acc[l];
  return sum;
}

// e^x: FastExp (fast_exp.h), vectorisable in float.
template <typename T>
TESSEL_LLM_INLINE T Exp(T x) {
  return FastExp(x);
}

template <typename T>
TESSEL_LLM_INLINE void LayernormRowT(int64_t c, const T* x, const T* w, const T* b, T eps, T* y, T* mean_out,
                                     T* rstd_out) {
  const T mean = LaneSum<T>(c, [&](int64_t j) { return x[j]; }) / T(c);
  const T var = LaneSum<T>(c,
                           [&](int64_t j) {
                             const T d = x[j] - mean;
                             return d * d;
                           }) /
                T(c);
  const T rstd = T(1) / std::sqrt(var + eps);
  for (int64_t j = 0; j < c; ++j) y[j] = (x[j] - mean) * rstd * w[j] + b[j];
  *mean_out = mean;
  *rstd_out = rstd;
}

template <typename T>
TESSEL_LLM_INLINE void LayernormRowBackwardT(int64_t c, const T* dy, const T* x, const T* w, T mean, T rstd, T* dx,
                                             T* dw_acc, T* db_acc) {
  const T dnorm_mean = LaneSum<T>(c, [&](int64_t j) { return w[j] * dy[j]; }) / T(c);
  const T dnorm_norm_mean = LaneSum<T>(c, [&](int64_t j) { return w[j] * dy[j] * ((x[j] - mean) * rstd); }) / T(c);
  for (int64_t j = 0; j < c; ++j) {
    const T xhat = (x[j] - mean) * rstd;
    const T dnorm = w[j] * dy[j];
    db_acc[j] += dy[j];
    dw_acc[j] += xhat * dy[j];
    dx[j] += (dnorm - dnorm_mean - xhat * dnorm_norm_mean) * rstd;
  }
}

template <typename T>
TESSEL_LLM_INLINE void OnlineSoftmaxTileT(int64_t rows, int64_t cols, int64_t ld, int64_t mask_shift,
                                          T* __restrict__ st, T* __restrict__ m, T* __restrict__ l,
                                          T* __restrict__ alpha) {
  // The first query that sees key j; rows past it all do (causal).
  auto first_row = [&](int64_t j) { return std::clamp<int64_t>(j + mask_shift, 0, rows); };
  for (int64_t r = 0; r < rows; ++r) alpha[r] = m[r];  // m_old, for now
  for (int64_t j = 0; j < cols; ++j) {
    const T* s = st + j * ld;
    for (int64_t r = first_row(j); r < rows; ++r) m[r] = std::max(m[r], s[r]);
  }
  for (int64_t r = 0; r < rows; ++r) {
    alpha[r] = alpha[r] == -std::numeric_limits<T>::infinity() ? T(0) : Exp(alpha[r] - m[r]);
    l[r] *= alpha[r];
  }
  for (int64_t j = 0; j < cols; ++j) {
    T* s = st + j * ld;
    const int64_t r0 = first_row(j);
    for (int64_t r = 0; r < r0; ++r) s[r] = T(0);
    for (int64_t r = r0; r < rows; ++r) {
      s[r] = Exp(s[r] - m[r]);
      l[r] += s[r];
    }
  }
}

template <typename T>
TESSEL_LLM_INLINE void ExpShiftedT(int64_t n, T shift, T* x) {
  for (int64_t j = 0; j < n; ++j) x[j] = Exp(x[j] - shift);
}

}  // namespace

TESSEL_LLM_CLONES void LayernormRow(int64_t c, const float* x, const float* w, const float* b, float eps, float* y,
                                    float* mean, float* rstd) {
  LayernormRowT(c, x, w, b, eps, y, mean, rstd);
}
TESSEL_LLM_CLONES void LayernormRow(int64_t c, const double* x, const double* w, const double* b, double eps, double* y,
                                    double* mean, double* rstd) {
  LayernormRowT(c, x, w, b, eps, y, mean, rstd);
}

TESSEL_LLM_CLONES void LayernormRowBackward(int64_t c, const float* dy, const float* x, const float* w, float mean,
                                            float rstd, float* dx, float* dw_acc, float* db_acc) {
  LayernormRowBackwardT(c, dy, x, w, mean, rstd, dx, dw_acc, db_acc);
}
TESSEL_LLM_CLONES void LayernormRowBackward(int64_t c, const double* dy, const double* x, const double* w, double mean,
                                            double rstd, double* dx, double* dw_acc, double* db_acc) {
  LayernormRowBackwardT(c, dy, x, w, mean, rstd, dx, dw_acc, db_acc);
}

TESSEL_LLM_CLONES void OnlineSoftmaxTile(int64_t rows, int64_t cols, int64_t ld, int64_t mask_shift, float* st,
                                         float* m, float* l, float* alpha) {
  OnlineSoftmaxTileT(rows, cols, ld, mask_shift, st, m, l, alpha);
}
TESSEL_LLM_CLONES void OnlineSoftmaxTile(int64_t rows, int64_t cols, int64_t ld, int64_t mask_shift, double* st,
                                         double* m, double* l, double* alpha) {
  OnlineSoftmaxTileT(rows, cols, ld, mask_shift, st, m, l, alpha);
}

TESSEL_LLM_CLONES void ExpShifted(int64_t n, float shift, float* x) { ExpShiftedT(n, shift, x); }
TESSEL_LLM_CLONES void ExpShifted(int64_t n, double shift, double* x) { ExpShiftedT(n, shift, x); }

TESSEL_LLM_CLONES void SoftmaxGradRow(int64_t n, const float* p, float d, float* dp) {
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - d);
}
TESSEL_LLM_CLONES void SoftmaxGradRow(int64_t n, const double* p, double d, double* dp) {
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - d);
}

TESSEL_LLM_CLONES float RowDot(int64_t n, const float* x, const float* y) {
  return LaneSum<float>(n, [&](int64_t j) { return x[j] * y[j]; });
}
TESSEL_LLM_CLONES double RowDot(int64_t n, const double* x, const double* y) {
  return LaneSum<double>(n, [&](int64_t j) { return x[j] * y[j]; });
}

TESSEL_LLM_CLONES void ScaleRow(int64_t n, float a, float* x) {
  for (int64_t j = 0; j < n; ++j) x[j] *= a;
}
TESSEL_LLM_CLONES void ScaleRow(int64_t n, double a, double* x) {
  for (int64_t j = 0; j < n; ++j) x[j] *= a;
}

}  // namespace tessel::kernels::llm

// Row loops of the CPU kernels: sums of gathered rows (the edge loops of message passing) and the small
// dense vector operations around them. Each is compiled three times, for x86-64-v4 (AVX-512),
// x86-64-v3 (AVX2) and baseline x86-64, and the loader picks the best the CPU runs (GCC function
// multiversioning), so one plugin binary uses the machine's full vector width. Gathers prefetch the rows
// a few edges ahead, since on a graph larger than the caches each row is a miss.
//
// Every clone adds in the same order (along each column, edge by edge; dot products in 8 fixed partial
// sums) and is compiled without FMA contraction, so results are the same bits on every CPU and at
// every thread count.
// Thread safety: pure functions over caller-owned memory; `out` must not alias the inputs.
#pragma once

#include <cstdint>

namespace tessel::kernels {

// out[0..k) = scale * sum_{i < n} x[row(i)][0..k), row(i) = idx[i], or map[idx[i]] when map is given.
// Overwrites out (0 when n == 0).
void GatherSum(const float* x, int64_t k, const int32_t* idx, const int64_t* map, int64_t n, float scale, float* out);
void GatherSum(const double* x, int64_t k, const int32_t* idx, const int64_t* map, int64_t n, double scale,
               double* out);

// out[0..k) = sum_{i < n} coef[seg[i]] * x[row_of[seg[i]]][0..k): each item names a segment, whose row
// and coefficient are looked up (the gradient that reaches a pair: sum over its edges of the edge's
// segment's norm times the gradient of the segment's destination). Overwrites out.
void GatherSegments(const float* x, int64_t k, const int32_t* seg, int64_t n, const int32_t* row_of, const float* coef,
                    float* out);
void GatherSegments(const double* x, int64_t k, const int32_t* seg, int64_t n, const int32_t* row_of,
                    const double* coef, double* out);

// y[0..n) += x[0..n)
void AddRow(int64_t n, const float* x, float* y);
void AddRow(int64_t n, const double* x, double* y);
// y[0..n) += a * x[0..n)
void AxpyRow(int64_t n, float a, const float* x, float* y);
void AxpyRow(int64_t n, double a, const double* x, double* y);
// sum x[i] * y[i], in 8 partial sums (i mod 8) added in order at the end
float DotRow(int64_t n, const float* x, const float* y);
double DotRow(int64_t n, const double* x, const double* y);

}  // namespace tessel::kernels

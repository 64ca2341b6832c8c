// Row loops of the CPU kernels: sums of gathered rows (the edge loops of message passing), the small
// dense vector operations around them, and Adam's elementwise update. Each is compiled three times, for x86-64-v4
// (AVX-512), x86-64-v3 (AVX2) and baseline x86-64, and the loader picks the best the CPU runs (GCC function
// multiversioning), so one plugin binary uses the machine's full vector width. Gathers prefetch the rows
// a few edges ahead, since on a graph larger than the caches each row is a miss.
//
// Every clone adds in the same order (along each column, edge by edge in order; dot products in 8 fixed
// partial sums) and is compiled without FMA contraction, so results are the same bits on every CPU and at
// every thread count.
// Thread safety: pure functions over caller-owned memory; `out` must not alias the inputs.
#pragma once

#include <cstdint>

namespace tessel::kernels {

// Gathers over runs of items, each item a contiguous range of "edges" [ptr[i], ptr[i + 1]) (absolute
// indices into the index arrays); rows are prefetched a few edges ahead across item boundaries, so short
// items (a few edges each, as most are) still overlap their misses. out is [items, k], overwritten
// (an item without edges gets zeros).
//
// out[i] = scale[i] * sum_{e in item i} x[row(e)], row(e) = idx[e], or map[idx[e]] when map is given;
// no scale: 1.
void GatherSumItems(const float* x, int64_t k, const int64_t* ptr, int64_t items, const int32_t* idx,
                    const int64_t* map, const float* scale, float* out);
void GatherSumItems(const double* x, int64_t k, const int64_t* ptr, int64_t items, const int32_t* idx,
                    const int64_t* map, const double* scale, double* out);
// out[i] = sum_{e in item i} coef[seg[e]] * x[row_of[seg[e]]]: each edge names a segment, whose row and
// coefficient are looked up (the gradient that reaches a pair: over its edges, the edge's segment's
// norm times the gradient of the segment's destination).
void GatherSegmentItems(const float* x, int64_t k, const int64_t* ptr, int64_t items, const int32_t* seg,
                        const int32_t* row_of, const float* coef, float* out);
void GatherSegmentItems(const double* x, int64_t k, const int64_t* ptr, int64_t items, const int32_t* seg,
                        const int32_t* row_of, const double* coef, double* out);

// GPT-2's tanh GELU, y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as x sigmoid(2u)
// with one exponential (FastExp); and its backward, dx = dy (s + 2 x s (1 - s) du/dx), s = sigmoid(2u).
void GeluTanhRow(int64_t n, const float* x, float* y);
void GeluTanhRow(int64_t n, const double* x, double* y);
void GeluTanhBwdRow(int64_t n, const float* dy, const float* x, float* dx);
void GeluTanhBwdRow(int64_t n, const double* dy, const double* x, double* dx);

// y[0..n) += x[0..n)
void AddRow(int64_t n, const float* x, float* y);
void AddRow(int64_t n, const double* x, double* y);
// y[0..n) += a * x[0..n)
void AxpyRow(int64_t n, float a, const float* x, float* y);
void AxpyRow(int64_t n, double a, const double* x, double* y);
// sum x[i] * y[i], in 8 partial sums (i mod 8) added in order at the end
float DotRow(int64_t n, const float* x, const float* y);
double DotRow(int64_t n, const double* x, const double* y);

// optim.adam.step's update (<tessel/ops/optim.h>) on n elements, with its per-step constants worked out
// once: g = grad + weight_decay * p (grad null: a zero gradient); m += (1 - beta1)(g - m);
// v = beta2 v + (1 - beta2) g^2; p -= step_size * m / (sqrt(v) / bias2_sqrt + eps).
template <typename T>
struct AdamConstants {
  T step_size, bias2_sqrt, one_minus_beta1, beta2, one_minus_beta2, weight_decay, eps;
};
void AdamSpan(int64_t n, float* p, const float* grad, float* m, float* v, const AdamConstants<float>& c);
void AdamSpan(int64_t n, double* p, const double* grad, double* m, double* v, const AdamConstants<double>& c);

}  // namespace tessel::kernels

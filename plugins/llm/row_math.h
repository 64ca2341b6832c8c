// Row loops of the GPT-2 CPU kernels: layer norm of one row and its backward, and the softmax pieces of
// attention (a key tile of the online softmax, shifted exponentials, the softmax gradient). Each is
// compiled three times, for x86-64-v4 (AVX-512), x86-64-v3 (AVX2) and baseline x86-64, and the loader
// picks the best the CPU runs (GCC function multiversioning), as plugins/common/row_ops.h does.
//
// Every clone adds in the same order (sums in fixed lanes, i mod kLanes, added in order at the end) and
// is compiled without FMA contraction, so results are the same bits on every CPU and at every thread
// count. The float exponential is a polynomial (Cephes expf, within 2 ulp) that vectorises; the double
// one is std::exp.
// Thread safety: pure functions over caller-owned memory.
#pragma once

#include <cstdint>

namespace tessel::kernels::llm {

// One row of llm.layernorm.fwd: mean, rstd = 1 / sqrt(biased variance + eps), y = (x - mean) rstd w + b.
void LayernormRow(int64_t c, const float* x, const float* w, const float* b, float eps, float* y, float* mean,
                  float* rstd);
void LayernormRow(int64_t c, const double* x, const double* w, const double* b, double eps, double* y, double* mean,
                  double* rstd);

// One row of llm.layernorm.bwd: dx += the gradient through the normalisation; dw_acc += dy xhat,
// db_acc += dy (the caller's partial sums of a block of rows).
void LayernormRowBackward(int64_t c, const float* dy, const float* x, const float* w, float mean, float rstd, float* dx,
                          float* dw_acc, float* db_acc);
void LayernormRowBackward(int64_t c, const double* dy, const double* x, const double* w, double mean, double rstd,
                          double* dx, double* dw_acc, double* db_acc);

// One key tile of the online softmax (attention_cpu.cc's forward), over a tile of scores stored key-major:
// st[j * ld + r] is query r's score for key j, r < rows, j < cols. Query r sees key j when
// r >= j + mask_shift (mask_shift = the tile's first key - its first query; <= 1 - cols below the
// diagonal: every key seen). m[r] and l[r] are the query's running max (-inf before its first key) and
// sum. Afterwards m[r] = m_new = max(m[r], its scores seen here), alpha[r] = exp(m_old - m_new) (0 when
// m_old = -inf), l[r] = alpha[r] l[r] + sum_j st[j * ld + r], with st[j * ld + r] = exp(score - m_new)
// where seen and 0 where masked. Key-major, every step runs along the tile's rows of queries (elementwise
// over r, no reduction across lanes), which keeps the per-tile cost down at 64-wide tiles.
void OnlineSoftmaxTile(int64_t rows, int64_t cols, int64_t ld, int64_t mask_shift, float* st, float* m, float* l,
                       float* alpha);
void OnlineSoftmaxTile(int64_t rows, int64_t cols, int64_t ld, int64_t mask_shift, double* st, double* m, double* l,
                       double* alpha);
// x[j] = exp(x[j] - shift) for j < n.
void ExpShifted(int64_t n, float shift, float* x);
void ExpShifted(int64_t n, double shift, double* x);
// dp[j] = p[j] (dp[j] - d) for j < n: the softmax gradient, in place over dP.
void SoftmaxGradRow(int64_t n, const float* p, float d, float* dp);
void SoftmaxGradRow(int64_t n, const double* p, double d, double* dp);
// sum x[j] y[j], j < n.
float RowDot(int64_t n, const float* x, const float* y);
double RowDot(int64_t n, const double* x, const double* y);
// x[j] *= a for j < n.
void ScaleRow(int64_t n, float a, float* x);
void ScaleRow(int64_t n, double a, double* x);

}  // namespace tessel::kernels::llm

/* Ops shared by every model family (provided by libtessel_nn.so): activations, the classification
 * loss and dense matrix products. See <tessel/ops/op.h> for the declaration scheme.
 *
 * nn.relu.fwd          Y = max(X, 0)
 * nn.relu.bwd          dX = dY where Y > 0, else 0 (from the output, so the input need not be kept)
 * nn.gelu.fwd          Y = X * Phi(X), the exact (erf) GELU
 * nn.gelu.bwd          dX = dY * (Phi(X) + X * phi(X))
 * nn.softmax_xent.fwd_bwd
 *                      rows with mask = 1 and label >= 0 contribute: loss_sum = sum of -log softmax(logits)
 *                      [label] (double, log-sum-exp), correct = count of argmax == label (the first
 *                      maximum wins), dlogits = (softmax - onehot) * scale on contributing rows, 0 elsewhere.
 *                      A contributing label >= C is bad data.
 * nn.embedding.fwd    Y[m] = W[ids[m]] (a row gather; an id out of [0, V) is bad data)
 * nn.embedding.bwd    dW zeroed, then dW[ids[m]] += dY[m] (repeated ids sum, in index order)
 * nn.gemm              C = alpha * op(A) @ op(B) + beta * C, op = transpose when trans_a / trans_b is set.
 *                      C is an output that is also read when beta != 0. Shapes: op(A) is [M, K], op(B)
 *                      [K, N], C [M, N]; the schema names the stored shapes.
 */
#ifndef TESSEL_OPS_NN_H_
#define TESSEL_OPS_NN_H_

#include "tessel/ops/op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessel_softmax_xent_params {
  size_t struct_size;
  double scale; /* multiplies dlogits (1 / number of training rows for a mean loss; 0 = evaluation) */
} tessel_softmax_xent_params;

typedef struct tessel_gemm_params {
  size_t struct_size;
  int32_t trans_a; /* 0 or 1 */
  int32_t trans_b; /* 0 or 1 */
  double alpha;
  double beta;
} tessel_gemm_params;

#define TESSEL_NN_OPS(X)                                                                                   \
  X(nn_relu_fwd, "nn.relu.fwd", "nn.relu.fwd(X:T[N,D]) -> (Y:T[N,D])", 0, "")                              \
  X(nn_relu_bwd, "nn.relu.bwd", "nn.relu.bwd(dY:T[N,D], Y:T[N,D]) -> (dX:T[N,D])", 0, "")                  \
  X(nn_gelu_fwd, "nn.gelu.fwd", "nn.gelu.fwd(X:T[N,D]) -> (Y:T[N,D])", 0, "")                              \
  X(nn_gelu_bwd, "nn.gelu.bwd", "nn.gelu.bwd(dY:T[N,D], X:T[N,D]) -> (dX:T[N,D])", 0, "")                  \
  X(nn_softmax_xent, "nn.softmax_xent.fwd_bwd",                                                            \
    "nn.softmax_xent.fwd_bwd(logits:T[N,C], labels:i64[N], mask:u8[N]) -> "                                \
    "(loss_sum:f64[1], correct:i64[1], dlogits:T[N,C])",                                                   \
    sizeof(tessel_softmax_xent_params), "")                                                                \
  X(nn_embedding_fwd, "nn.embedding.fwd", "nn.embedding.fwd(W:T[V,D], ids:i64[M]) -> (Y:T[M,D])", 0, "")   \
  X(nn_embedding_bwd, "nn.embedding.bwd", "nn.embedding.bwd(dY:T[M,D], ids:i64[M]) -> (dW:T[V,D])", 0, "") \
  X(nn_gemm, "nn.gemm", "nn.gemm(A:T[P,Q], B:T[S,U]) -> (C:T[M,N])", sizeof(tessel_gemm_params), "")

TESSEL_NN_OPS(TESSEL_DECLARE_OP)

#ifdef __cplusplus
}
#endif

#endif /* TESSEL_OPS_NN_H_ */

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
 *                      A contributing label >= C is bad data. dlogits may be the logits buffer itself
 *                      (in place: a classifier then holds one [N, C] buffer, not two; llm.c's fused
 *                      classifier): a kernel reads a row's logits before it writes that row's gradient.
 * nn.embedding.fwd    Y[m] = W[ids[m]] (a row gather; an id out of [0, V) is bad data)
 * nn.embedding.bwd    dW zeroed, then dW[ids[m]] += dY[m] (repeated ids sum, in index order)
 * nn.gemm              C = alpha * op(A) @ op(B) + beta * C, op = transpose when trans_a / trans_b is set.
 *                      C is an output that is also read when beta != 0. Shapes: op(A) is [M, K], op(B)
 *                      [K, N], C [M, N]; the schema names the stored shapes.
 * nn.linear.fwd        Y = X W^T + b (W is [O, K], out-major, as torch.nn.Linear and llm.c store it).
 * nn.linear.bwd        dX = dY W (WRITTEN), dW += dY^T X, db += the column sums of dY (ADDED: parameter
 *                      gradients accumulate over micro-batches; A: f32 under bf16). dX and db are optional
 *                      (0 rows: not computed; a layer without a bias, the tied GPT head).
 *                      Sums over rows are in a fixed order: the same result whatever the threads.
 * nn.linear_gelu_tanh.fwd
 *                      Pre = X W^T + b and Y = gelu_tanh(Pre): nn.linear.fwd then nn.gelu_tanh.fwd in one
 *                      call (a GPT block's MLP, which keeps Pre for the backward), so that a kernel can fuse
 *                      the bias and the GELU into the matmul (cuBLASLt's epilogue on CUDA, which applies the
 *                      GELU to the f32 sum, before Pre's rounding under bf16).
 * nn.gelu_tanh.fwd     Y = 0.5 X (1 + tanh(sqrt(2/pi) (X + 0.044715 X^3))), GPT-2's GELU
 * nn.gelu_tanh.bwd     dX = dY * d/dX of the above (WRITTEN)
 * nn.add               C = A + B, elementwise (C may be the same buffer as A or B)
 * nn.sum_squares       S[0] = sum of X[i]^2, accumulated in double in a fixed order (a gradient norm)
 * nn.cast              Y = X rounded to T (nearest, ties to even; a copy when T is A): the bf16 working
 *                      copy of f32 master weights. T is Y's dtype.
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

#define TESSEL_NN_OPS(X)                                                                                               \
  X(nn_relu_fwd, "nn.relu.fwd", "nn.relu.fwd(X:T[N,D]) -> (Y:T[N,D])", 0, "")                                          \
  X(nn_relu_bwd, "nn.relu.bwd", "nn.relu.bwd(dY:T[N,D], Y:T[N,D]) -> (dX:T[N,D])", 0, "")                              \
  X(nn_gelu_fwd, "nn.gelu.fwd", "nn.gelu.fwd(X:T[N,D]) -> (Y:T[N,D])", 0, "")                                          \
  X(nn_gelu_bwd, "nn.gelu.bwd", "nn.gelu.bwd(dY:T[N,D], X:T[N,D]) -> (dX:T[N,D])", 0, "")                              \
  X(nn_softmax_xent, "nn.softmax_xent.fwd_bwd",                                                                        \
    "nn.softmax_xent.fwd_bwd(logits:T[N,C], labels:i64[N], mask:u8[N]) -> "                                            \
    "(loss_sum:f64[1], correct:i64[1], dlogits:T[N,C])",                                                               \
    sizeof(tessel_softmax_xent_params), "")                                                                            \
  X(nn_embedding_fwd, "nn.embedding.fwd", "nn.embedding.fwd(W:T[V,D], ids:i64[M]) -> (Y:T[M,D])", 0, "")               \
  X(nn_embedding_bwd, "nn.embedding.bwd", "nn.embedding.bwd(dY:T[M,D], ids:i64[M]) -> (dW:T[V,D])", 0, "")             \
  X(nn_gemm, "nn.gemm", "nn.gemm(A:T[P,Q], B:T[S,U]) -> (C:T[M,N])", sizeof(tessel_gemm_params), "")                   \
  X(nn_linear_fwd, "nn.linear.fwd", "nn.linear.fwd(X:T[N,K], W:T[O,K], b:T[O]) -> (Y:T[N,O])", 0, "")                  \
  X(nn_linear_bwd, "nn.linear.bwd", "nn.linear.bwd(dY:T[N,O], X:T[N,K], W:T[O,K]) -> (dX:T[N,K], dW:A[O,K], db:A[O])", \
    0, "dX,db")                                                                                                        \
  X(nn_linear_gelu_tanh_fwd, "nn.linear_gelu_tanh.fwd",                                                                \
    "nn.linear_gelu_tanh.fwd(X:T[N,K], W:T[O,K], b:T[O]) -> (Y:T[N,O], Pre:T[N,O])", 0, "")                            \
  X(nn_gelu_tanh_fwd, "nn.gelu_tanh.fwd", "nn.gelu_tanh.fwd(X:T[N,D]) -> (Y:T[N,D])", 0, "")                           \
  X(nn_gelu_tanh_bwd, "nn.gelu_tanh.bwd", "nn.gelu_tanh.bwd(dY:T[N,D], X:T[N,D]) -> (dX:T[N,D])", 0, "")               \
  X(nn_add, "nn.add", "nn.add(A:T[N], B:T[N]) -> (C:T[N])", 0, "")                                                     \
  X(nn_sum_squares, "nn.sum_squares", "nn.sum_squares(X:T[N]) -> (S:f64[1])", 0, "")                                   \
  X(nn_cast, "nn.cast", "nn.cast(X:A[N]) -> (Y:T[N])", 0, "")

TESSEL_NN_OPS(TESSEL_DECLARE_OP)

#ifdef __cplusplus
}
#endif

#endif /* TESSEL_OPS_NN_H_ */

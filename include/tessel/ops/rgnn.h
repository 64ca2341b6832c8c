/* Relational GNN ops (provided by libtessel_rgnn.so). See <tessel/ops/op.h> for the declaration scheme.
 *
 * The compact worker graph layout, Hector's "separate COO", for E edges sorted by (relation, source row):
 *   uniq_ptr      i64[R+1]  compact rows of relation r are [uniq_ptr[r], uniq_ptr[r+1])
 *   uniq_src      i64[U]    the input row of each compact row; (relation, source) pairs are unique, so a
 *                           typed linear runs once per unique pair, not once per edge (compact
 *                           materialization)
 *   edge_uniq     i64[E]    the compact row of each edge (nondecreasing)
 *   uniq_edge_ptr i64[U+1]  the edges of compact row u are [uniq_edge_ptr[u], uniq_edge_ptr[u+1])
 *   dst           i64[E]    destination row of each edge
 *   norm          T[E]      the edge's normalisation constant
 *   dst_ptr       i64[N+1], dst_edges i64[E]: CSR over destinations listing edge ids
 * r(u) denotes the relation whose range holds u.
 *
 * rgnn.typed_linear.fwd   Y[u] = X[uniq_src[u]] @ W[r(u)]
 * rgnn.typed_linear.bwd   dW[r] = X_r^T dY_r (overwritten; zero for an empty relation);
 *                         dX = sum over u with uniq_src[u] = m of dY[u] W[r(u)]^T, zero elsewhere;
 *                         a dX with 0 rows is not computed (the first layer needs no input gradient)
 * rgnn.typed_embed.fwd    featureless input: Y[u] = W[r(u)][row_id[uniq_src[u]]]
 * rgnn.typed_embed.bwd    dW zeroed, then dW[r(u)][row_id[uniq_src[u]]] += dY[u]
 * rgnn.aggregate.fwd      H[i] = sum over edges e into i of norm[e] * Y[edge_uniq[e]]
 * rgnn.aggregate.bwd      dY[u] = sum over edges e of u of norm[e] * dH[dst[e]]
 *
 * CPU kernels validate every index array (bad data); CUDA kernels trust them.
 */
#ifndef TESSEL_OPS_RGNN_H_
#define TESSEL_OPS_RGNN_H_

#include "tessel/ops/op.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TESSEL_RGNN_OPS(X)                                                                                   \
  X(rgnn_typed_linear_fwd, "rgnn.typed_linear.fwd",                                                        \
    "rgnn.typed_linear.fwd(X:T[M,K], W:T[R,K,D], uniq_ptr:i64[R+1], uniq_src:i64[U]) -> (Y:T[U,D])", 0, "")  \
  X(rgnn_typed_linear_bwd, "rgnn.typed_linear.bwd",                                                        \
    "rgnn.typed_linear.bwd(dY:T[U,D], X:T[M,K], W:T[R,K,D], uniq_ptr:i64[R+1], uniq_src:i64[U]) -> "         \
    "(dX:T[M,K], dW:T[R,K,D])",                                                                            \
    0, "dX")                                                                                               \
  X(rgnn_typed_embed_fwd, "rgnn.typed_embed.fwd",                                                          \
    "rgnn.typed_embed.fwd(W:T[R,V,D], uniq_ptr:i64[R+1], uniq_src:i64[U], row_id:i64[M]) -> (Y:T[U,D])", 0,  \
    "")                                                                                                    \
  X(rgnn_typed_embed_bwd, "rgnn.typed_embed.bwd",                                                          \
    "rgnn.typed_embed.bwd(dY:T[U,D], uniq_ptr:i64[R+1], uniq_src:i64[U], row_id:i64[M]) -> (dW:T[R,V,D])",  \
    0, "")                                                                                                 \
  X(rgnn_aggregate_fwd, "rgnn.aggregate.fwd",                                                              \
    "rgnn.aggregate.fwd(Y:T[U,D], edge_uniq:i64[E], norm:T[E], dst_ptr:i64[N+1], dst_edges:i64[E]) -> "      \
    "(H:T[N,D])",                                                                                          \
    0, "")                                                                                                 \
  X(rgnn_aggregate_bwd, "rgnn.aggregate.bwd",                                                              \
    "rgnn.aggregate.bwd(dH:T[N,D], dst:i64[E], norm:T[E], uniq_edge_ptr:i64[U+1]) -> (dY:T[U,D])", 0, "")

TESSEL_RGNN_OPS(TESSEL_DECLARE_OP)

#ifdef __cplusplus
}
#endif

#endif /* TESSEL_OPS_RGNN_H_ */

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
 *
 * ---------------------------------------------------------------------------------------------------
 * The fused kernels (rgnn.rgcn.*, rgnn.rgcn_embed.*, rgnn.rgat.*, rgnn.rgat_embed.*, rgnn.hgt.*) take the
 * SEGMENT LAYOUT instead. They never materialise a tensor of size pairs x width or edges x width: they
 * aggregate first and apply the relation's weights to the aggregate (linear-operator reordering), one
 * tile of rows at a time, so memory stays proportional to nodes, not edges.
 *
 * Rows: a layer's input has M rows (a worker's owned rows first, then its halo rows); its output has N
 * rows, the owned ones (N <= M). Edges go from an input row (source) to an output row (destination).
 *
 * A SEGMENT is the set of edges of one relation into one destination, (r, i); a PAIR the set of edges of
 * one relation out of one source, (r, j). With compaction off (model.compact = false) every edge is its
 * own segment and its own pair, so the kernels do per-edge work; the results are the same.
 *
 * DST layout, 7 tensors, in this order (destination-major; what forward passes walk):
 *   dblk_row  i64[B+1]  dst block b owns the output rows [dblk_row[b], dblk_row[b+1]); blocks tile [0, N)
 *   dblk_run  i64[B+1]  block b's runs are [dblk_run[b], dblk_run[b+1]); the runs of all blocks tile [0, Q)
 *   drun_rel  i32[Q]    the relation of run q; a block's runs have distinct, increasing relations
 *   drun_seg  i64[Q+1]  run q's segments are [drun_seg[q], drun_seg[q+1]); they tile [0, S)
 *   seg_dst   i32[S]    the destination row of segment s, inside its block's rows, nondecreasing in a run
 *   seg_edge  i64[S+1]  segment s's edges are [seg_edge[s], seg_edge[s+1]) (dst-major edge order); they
 *                       tile [0, E), and no segment is empty
 *   dedge_src i32[E]    the source row of each dst-major edge
 * SRC layout, 7 tensors, in this order (source-major; what backward passes walk), the same edges:
 *   sblk_row  i64[C+1]  src block c owns the input rows [sblk_row[c], sblk_row[c+1]); blocks tile [0, M)
 *   sblk_run  i64[C+1]  block c's runs are [sblk_run[c], sblk_run[c+1]); they tile [0, P)
 *   srun_rel  i32[P]    the relation of run p; a block's runs have distinct, increasing relations
 *   srun_pair i64[P+1]  run p's pairs are [srun_pair[p], srun_pair[p+1]); they tile [0, U)
 *   pair_src  i32[U]    the source row of pair u, inside its block's rows, nondecreasing in a run
 *   pair_edge i64[U+1]  pair u's edges are [pair_edge[u], pair_edge[u+1]) (src-major edge order); they
 *                       tile [0, E), and no pair is empty
 *   sedge_seg i32[E]    the segment of each src-major edge (so its destination is seg_dst[sedge_seg[e]])
 * RGAT also takes dedge_pair i32[E]: the pair of each dst-major edge.
 * Work is parallel over blocks: every output row a kernel writes belongs to one block, so the CPU kernels
 * need no atomics and sum in a fixed order (a given thread count gives the same bits every run).
 *
 * rgnn.rgcn.fwd        H[i] = sum over segments s = (r, i): seg_norm[s] * (sum_{e in s} X[src(e)]) @ W[r]
 *                      (seg_norm = 1 / |N_r(i)|, the R-GCN normalisation; compaction-independent)
 * rgnn.rgcn.bwd        dW[r] = sum_u X[src(u)]^T B[u] and dX[j] = sum_{u = (r, j)} B[u] @ W[r]^T, with
 *                      B[u] = sum_{e in u} seg_norm[seg(e)] * dH[dst(e)]; both overwritten; dX with 0 rows
 *                      is skipped
 * rgnn.rgcn_embed.*    the same with a one-hot input: X[j] @ W[r] is row row_id[j] of W[r]; dW is zeroed,
 *                      then its rows (r, row_id[j]) are written. row_id holds distinct ids (each row is one
 *                      node).
 * rgnn.rgcn_embed.bwd_rows
 *                      the same gradient as rows: dRows[u] = the gradient of row (r, row_id[src(u)]) of W,
 *                      for each pair u, with nothing else written (for optim.adam.step_rows)
 *
 * rgnn.rgat.fwd        workers/rgnn/MODELS.md "RGAT", one layer, H heads of width Dh (F = H * Dh):
 *                      s_src[u, h] = att_src[r, h] . (X[src(u)] W[r])_h   (per pair u = (r, j))
 *                      s_dst[s, h] = att_dst[r, h] . (X[dst(s)] W[r])_h   (per segment s = (r, i); a
 *                      destination row i is also input row i)
 *                      score(e, h) = LeakyReLU(s_src[pair(e), h] + s_dst[seg(e), h], 0.2);
 *                      alpha = softmax over all edges into the destination, per head;
 *                      heads[i, h] = sum_s (sum_{e in s} alpha(e, h) X[src(e)]) W[r]_h;
 *                      Out = heads (merge 0, concat: O = F) or their mean over h (merge 1: O = Dh).
 *                      row_max/row_sum: the softmax's max and sum per (row, head), kept for backward.
 *                      With reorder on, s_src and s_dst come from X . (W[r] att[r]) (K flops a row and
 *                      head); with it off, from the full X W[r] product. heads may have 0 rows when
 *                      merge = concat (Out is the heads then).
 * rgnn.rgat.bwd        every input gradient of rgnn.rgat.fwd from dOut (dX with 0 rows is skipped),
 *                      overwritten.
 * rgnn.rgat_embed.*    the same with a one-hot input (X[j] W[r] is row row_id[j] of W[r]).
 *
 * rgnn.hgt.fwd         the attention core of workers/rgnn/MODELS.md "HGT", given k, q, v (F = H * Dh):
 *                      score(e, h) = (K[src(e)]_h att[r, h]) . Q[dst(e)]_h * prior[r, h] / sqrt(Dh);
 *                      alpha = softmax over all edges into the destination, per head;
 *                      Agg[i]_h = sum_s (sum_{e in s} alpha(e, h) V[src(e)]_h) msg[r, h].
 *                      row_max/row_sum as for RGAT. With reorder on, att is applied to Q once per segment and
 *                      msg after the aggregation; with it off, K att and V msg are formed per pair rather than
 *                      per edge (compact materialisation without reordering), in a workspace: [U, F] each on
 *                      CPU, a chunk of pairs at a time on CUDA.
 * rgnn.hgt.bwd         dK, dQ, dV, datt, dmsg, dprior of rgnn.hgt.fwd from dAgg, overwritten.
 *
 * rgnn.typed_gate.fwd  HGT's gated skip, per row i of node type t = node_type[i]:
 *                      Y[i] = sigmoid(skip[t]) O[i] + (1 - sigmoid(skip[t])) X[i]
 * rgnn.typed_gate.bwd  dO, dX (the skip path's share of the input gradient) and dskip, overwritten
 * rgnn.block_diag.fwd  W[r] = blockdiag(blocks[r, 0], ..., blocks[r, B-1]) with blocks [P, Q]: W is
 *                      [R, B*P, B*Q], zero outside the blocks (RGCN's block-diagonal decomposition)
 * rgnn.block_diag.bwd  dblocks[r, b] = the [P, Q] block b of dW[r]
 */
#ifndef TESSEL_OPS_RGNN_H_
#define TESSEL_OPS_RGNN_H_

#include "tessel/ops/op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessel_rgat_params {
  size_t struct_size;
  int32_t heads;        /* H */
  int32_t merge;        /* 0: concatenate the heads (O = H * Dh); 1: average them (O = Dh) */
  int32_t reorder;      /* 1: attention logits from X . (W att); 0: from the full X W product */
  float negative_slope; /* of the LeakyReLU on the logits: 0.2 */
} tessel_rgat_params;

typedef struct tessel_hgt_params {
  size_t struct_size;
  int32_t heads;   /* H */
  int32_t reorder; /* 1: att applied to q once per segment; 0: to k once per pair */
} tessel_hgt_params;

/* The layout tensors, spelled once for every fused op's schema. */
#define TESSEL_RGNN_DST_LAYOUT                                                                 \
  "dblk_row:i64[B+1], dblk_run:i64[B+1], drun_rel:i32[Q], drun_seg:i64[Q+1], seg_dst:i32[S], " \
  "seg_edge:i64[S+1], dedge_src:i32[E]"
#define TESSEL_RGNN_SRC_LAYOUT                                                                   \
  "sblk_row:i64[C+1], sblk_run:i64[C+1], srun_rel:i32[P], srun_pair:i64[P+1], pair_src:i32[U], " \
  "pair_edge:i64[U+1], sedge_seg:i32[E]"

#define TESSEL_RGNN_OPS(X)                                                                                            \
  X(rgnn_typed_linear_fwd, "rgnn.typed_linear.fwd",                                                                   \
    "rgnn.typed_linear.fwd(X:T[M,K], W:T[R,K,D], uniq_ptr:i64[R+1], uniq_src:i64[U]) -> (Y:T[U,D])", 0, "")           \
  X(rgnn_typed_linear_bwd, "rgnn.typed_linear.bwd",                                                                   \
    "rgnn.typed_linear.bwd(dY:T[U,D], X:T[M,K], W:T[R,K,D], uniq_ptr:i64[R+1], uniq_src:i64[U]) -> "                  \
    "(dX:T[M,K], dW:T[R,K,D])",                                                                                       \
    0, "dX")                                                                                                          \
  X(rgnn_typed_embed_fwd, "rgnn.typed_embed.fwd",                                                                     \
    "rgnn.typed_embed.fwd(W:T[R,V,D], uniq_ptr:i64[R+1], uniq_src:i64[U], row_id:i64[M]) -> (Y:T[U,D])", 0, "")       \
  X(rgnn_typed_embed_bwd, "rgnn.typed_embed.bwd",                                                                     \
    "rgnn.typed_embed.bwd(dY:T[U,D], uniq_ptr:i64[R+1], uniq_src:i64[U], row_id:i64[M]) -> (dW:T[R,V,D])", 0, "")     \
  X(rgnn_aggregate_fwd, "rgnn.aggregate.fwd",                                                                         \
    "rgnn.aggregate.fwd(Y:T[U,D], edge_uniq:i64[E], norm:T[E], dst_ptr:i64[N+1], dst_edges:i64[E]) -> "               \
    "(H:T[N,D])",                                                                                                     \
    0, "")                                                                                                            \
  X(rgnn_aggregate_bwd, "rgnn.aggregate.bwd",                                                                         \
    "rgnn.aggregate.bwd(dH:T[N,D], dst:i64[E], norm:T[E], uniq_edge_ptr:i64[U+1]) -> (dY:T[U,D])", 0, "")             \
  X(rgnn_rgcn_fwd, "rgnn.rgcn.fwd",                                                                                   \
    "rgnn.rgcn.fwd(X:T[M,K], W:T[R,K,D], seg_norm:T[S], " TESSEL_RGNN_DST_LAYOUT ") -> (H:T[N,D])", 0, "")            \
  X(rgnn_rgcn_bwd, "rgnn.rgcn.bwd",                                                                                   \
    "rgnn.rgcn.bwd(dH:T[N,D], X:T[M,K], W:T[R,K,D], seg_norm:T[S], seg_dst:i32[S], " TESSEL_RGNN_SRC_LAYOUT           \
    ") -> (dX:T[M,K], dW:T[R,K,D])",                                                                                  \
    0, "dX")                                                                                                          \
  X(rgnn_rgcn_embed_fwd, "rgnn.rgcn_embed.fwd",                                                                       \
    "rgnn.rgcn_embed.fwd(W:T[R,V,D], row_id:i64[M], seg_norm:T[S], " TESSEL_RGNN_DST_LAYOUT ") -> (H:T[N,D])", 0, "") \
  X(rgnn_rgcn_embed_bwd, "rgnn.rgcn_embed.bwd",                                                                       \
    "rgnn.rgcn_embed.bwd(dH:T[N,D], row_id:i64[M], seg_norm:T[S], seg_dst:i32[S], " TESSEL_RGNN_SRC_LAYOUT            \
    ") -> (dW:T[R,V,D])",                                                                                             \
    0, "")                                                                                                            \
  X(rgnn_rgcn_embed_bwd_rows, "rgnn.rgcn_embed.bwd_rows",                                                             \
    "rgnn.rgcn_embed.bwd_rows(dH:T[N,D], seg_norm:T[S], seg_dst:i32[S], " TESSEL_RGNN_SRC_LAYOUT                      \
    ") -> (dRows:T[U,D])",                                                                                            \
    0, "")                                                                                                            \
  X(rgnn_rgat_fwd, "rgnn.rgat.fwd",                                                                                   \
    "rgnn.rgat.fwd(X:T[M,K], W:T[R,K,F], att_src:T[R,H,Dh], att_dst:T[R,H,Dh], " TESSEL_RGNN_DST_LAYOUT               \
    ", dedge_pair:i32[E], " TESSEL_RGNN_SRC_LAYOUT                                                                    \
    ") -> (Out:T[N,O], heads:T[N,F], s_src:T[U,H], s_dst:T[S,H], row_max:T[N,H], row_sum:T[N,H])",                    \
    sizeof(tessel_rgat_params), "heads")                                                                              \
  X(rgnn_rgat_bwd, "rgnn.rgat.bwd",                                                                                   \
    "rgnn.rgat.bwd(dOut:T[N,O], X:T[M,K], W:T[R,K,F], att_src:T[R,H,Dh], att_dst:T[R,H,Dh], heads:T[N,F], "           \
    "s_src:T[U,H], s_dst:T[S,H], row_max:T[N,H], row_sum:T[N,H], " TESSEL_RGNN_DST_LAYOUT                             \
    ", dedge_pair:i32[E], " TESSEL_RGNN_SRC_LAYOUT                                                                    \
    ") -> (dX:T[M,K], dW:T[R,K,F], datt_src:T[R,H,Dh], datt_dst:T[R,H,Dh])",                                          \
    sizeof(tessel_rgat_params), "dX")                                                                                 \
  X(rgnn_rgat_embed_fwd, "rgnn.rgat_embed.fwd",                                                                       \
    "rgnn.rgat_embed.fwd(W:T[R,V,F], row_id:i64[M], att_src:T[R,H,Dh], att_dst:T[R,H,Dh], " TESSEL_RGNN_DST_LAYOUT    \
    ", dedge_pair:i32[E], " TESSEL_RGNN_SRC_LAYOUT                                                                    \
    ") -> (Out:T[N,O], heads:T[N,F], s_src:T[U,H], s_dst:T[S,H], row_max:T[N,H], row_sum:T[N,H])",                    \
    sizeof(tessel_rgat_params), "heads")                                                                              \
  X(rgnn_rgat_embed_bwd, "rgnn.rgat_embed.bwd",                                                                       \
    "rgnn.rgat_embed.bwd(dOut:T[N,O], W:T[R,V,F], row_id:i64[M], att_src:T[R,H,Dh], att_dst:T[R,H,Dh], "              \
    "heads:T[N,F], s_src:T[U,H], s_dst:T[S,H], row_max:T[N,H], row_sum:T[N,H], " TESSEL_RGNN_DST_LAYOUT               \
    ", dedge_pair:i32[E], " TESSEL_RGNN_SRC_LAYOUT ") -> (dW:T[R,V,F], datt_src:T[R,H,Dh], datt_dst:T[R,H,Dh])",      \
    sizeof(tessel_rgat_params), "")                                                                                   \
  X(rgnn_hgt_fwd, "rgnn.hgt.fwd",                                                                                     \
    "rgnn.hgt.fwd(Kx:T[M,F], Qx:T[N,F], Vx:T[M,F], att:T[R,H,Dh,Dh], msg:T[R,H,Dh,Dh], "                              \
    "prior:T[R,H], " TESSEL_RGNN_DST_LAYOUT ", dedge_pair:i32[E], " TESSEL_RGNN_SRC_LAYOUT                            \
    ") -> (Agg:T[N,F], row_max:T[N,H], row_sum:T[N,H])",                                                              \
    sizeof(tessel_hgt_params), "")                                                                                    \
  X(rgnn_typed_gate_fwd, "rgnn.typed_gate.fwd",                                                                       \
    "rgnn.typed_gate.fwd(O:T[N,D], X:T[N,D], skip:T[G], node_type:i32[N]) -> (Y:T[N,D])", 0, "")                      \
  X(rgnn_typed_gate_bwd, "rgnn.typed_gate.bwd",                                                                       \
    "rgnn.typed_gate.bwd(dY:T[N,D], O:T[N,D], X:T[N,D], skip:T[G], node_type:i32[N]) -> "                             \
    "(dO:T[N,D], dX:T[N,D], dskip:T[G])",                                                                             \
    0, "")                                                                                                            \
  X(rgnn_block_diag_fwd, "rgnn.block_diag.fwd", "rgnn.block_diag.fwd(blocks:T[R,B,P,Q]) -> (W:T[R,K,D])", 0, "")      \
  X(rgnn_block_diag_bwd, "rgnn.block_diag.bwd", "rgnn.block_diag.bwd(dW:T[R,K,D]) -> (dblocks:T[R,B,P,Q])", 0, "")    \
  X(rgnn_hgt_bwd, "rgnn.hgt.bwd",                                                                                     \
    "rgnn.hgt.bwd(dAgg:T[N,F], Kx:T[M,F], Qx:T[N,F], Vx:T[M,F], att:T[R,H,Dh,Dh], msg:T[R,H,Dh,Dh], "                 \
    "prior:T[R,H], Agg:T[N,F], row_max:T[N,H], row_sum:T[N,H], " TESSEL_RGNN_DST_LAYOUT                               \
    ", dedge_pair:i32[E], " TESSEL_RGNN_SRC_LAYOUT                                                                    \
    ") -> (dK:T[M,F], dQ:T[N,F], dV:T[M,F], datt:T[R,H,Dh,Dh], dmsg:T[R,H,Dh,Dh], "                                   \
    "dprior:T[R,H])",                                                                                                 \
    sizeof(tessel_hgt_params), "")

TESSEL_RGNN_OPS(TESSEL_DECLARE_OP)

#ifdef __cplusplus
}
#endif

#endif /* TESSEL_OPS_RGNN_H_ */

// The ops of libtessel_rgnn.so: names, schemas (identical to the host's table in
// workers/plugin_host/op_schemas.cc; a test loads the plugin and checks) and semantics.
//
// Worker graph layout, the "separate COO" of Hector, for E edges sorted by (relation, source row):
//   uniq_ptr      i64[R+1]  compact rows of relation r are [uniq_ptr[r], uniq_ptr[r+1])
//   uniq_src      i64[U]    the input row of each compact row; (relation, source) pairs are unique, so a
//                           typed linear runs once per unique pair, not once per edge (compact
//                           materialization)
//   edge_uniq     i64[E]    the compact row of each edge (nondecreasing)
//   uniq_edge_ptr i64[U+1]  the edges of compact row u are [uniq_edge_ptr[u], uniq_edge_ptr[u+1])
//   dst           i64[E]    destination row of each edge
//   norm          T[E]      the edge's normalisation constant
//   dst_ptr       i64[N+1], dst_edges i64[E]: CSR over destinations listing edge ids
// r(u) denotes the relation whose range holds u. T is f32 or f64, the same for every T tensor.
//
// 1. typed_linear.fwd   Y[u] = X[uniq_src[u]] @ W[r(u)]
// 2. typed_linear.bwd   dW[r] = X_r^T dY_r (overwritten; zero for an empty relation);
//                       dX = sum over u with uniq_src[u] = m of dY[u] W[r(u)]^T, zero elsewhere;
//                       a dX with 0 rows is not computed (the first layer needs no input gradient)
// 3. typed_embed.fwd    featureless input: Y[u] = W[r(u)][row_id[uniq_src[u]]]
// 4. typed_embed.bwd    dW zeroed, then dW[r(u)][row_id[uniq_src[u]]] += dY[u]
// 5. aggregate.fwd      H[i] = sum over edges e into i of norm[e] * Y[edge_uniq[e]]
// 6. aggregate.bwd      dY[u] = sum over edges e of u of norm[e] * dH[dst[e]]
// 7. relu.fwd/.bwd      Y = max(X, 0); dX = dY where Y > 0, else 0
// 8. softmax_xent       rows with mask = 1 and label >= 0 contribute: loss_sum = sum of
//                       -log softmax(logits)[label] (double, log-sum-exp), correct = count of
//                       argmax == label (first maximum wins), dlogits = (softmax - onehot) * scale on
//                       contributing rows, 0 elsewhere
// 9. adam.step          IN PLACE on param, m and v (inputs; there are no outputs).
//                       hyper = [lr, beta1, beta2, eps, weight_decay, step (1-based), 0 (reserved)];
//                       torch.optim.Adam: g = grad + weight_decay * param; m += (1 - beta1)(g - m);
//                       v = beta2 v + (1 - beta2) g^2; param -= lr / (1 - beta1^step) * m /
//                       (sqrt(v) / sqrt(1 - beta2^step) + eps)
//
// Every tensor of a call lives on the kernel's device; on CUDA that includes scale, hyper, loss_sum
// and correct. CPU kernels validate every index array (TESSEL_STATUS_BAD_DATA); CUDA kernels trust
// them (checking would cost a device round trip per call). Sums are deterministic on CPU; the CUDA
// backward kernels that scatter (typed_linear dX, typed_embed dW) use atomics.
#pragma once

namespace tessel::rgnn {

struct OpSchema {
  const char* op;
  const char* schema;
};

inline constexpr OpSchema kTypedLinearFwd{
    "rgnn.typed_linear.fwd",
    "rgnn.typed_linear.fwd(X:T[M,K], W:T[R,K,D], uniq_ptr:i64[R+1], uniq_src:i64[U]) -> (Y:T[U,D])"};
inline constexpr OpSchema kTypedLinearBwd{
    "rgnn.typed_linear.bwd",
    "rgnn.typed_linear.bwd(dY:T[U,D], X:T[M,K], W:T[R,K,D], uniq_ptr:i64[R+1], uniq_src:i64[U]) -> "
    "(dX:T[M,K], dW:T[R,K,D])"};
inline constexpr OpSchema kTypedEmbedFwd{
    "rgnn.typed_embed.fwd",
    "rgnn.typed_embed.fwd(W:T[R,V,D], uniq_ptr:i64[R+1], uniq_src:i64[U], row_id:i64[M]) -> (Y:T[U,D])"};
inline constexpr OpSchema kTypedEmbedBwd{
    "rgnn.typed_embed.bwd",
    "rgnn.typed_embed.bwd(dY:T[U,D], uniq_ptr:i64[R+1], uniq_src:i64[U], row_id:i64[M]) -> (dW:T[R,V,D])"};
inline constexpr OpSchema kAggregateFwd{
    "rgnn.aggregate.fwd",
    "rgnn.aggregate.fwd(Y:T[U,D], edge_uniq:i64[E], norm:T[E], dst_ptr:i64[N+1], dst_edges:i64[E]) -> (H:T[N,D])"};
inline constexpr OpSchema kAggregateBwd{
    "rgnn.aggregate.bwd",
    "rgnn.aggregate.bwd(dH:T[N,D], dst:i64[E], norm:T[E], uniq_edge_ptr:i64[U+1]) -> (dY:T[U,D])"};
inline constexpr OpSchema kReluFwd{"nn.relu.fwd", "nn.relu.fwd(X:T[N,D]) -> (Y:T[N,D])"};
inline constexpr OpSchema kReluBwd{"nn.relu.bwd", "nn.relu.bwd(dY:T[N,D], Y:T[N,D]) -> (dX:T[N,D])"};
inline constexpr OpSchema kSoftmaxXent{
    "nn.softmax_xent.fwd_bwd",
    "nn.softmax_xent.fwd_bwd(logits:T[N,C], labels:i64[N], mask:u8[N], scale:f64[1]) -> "
    "(loss_sum:f64[1], correct:i64[1], dlogits:T[N,C])"};
inline constexpr OpSchema kAdamStep{"optim.adam.step",
                                    "optim.adam.step(param:T[P], grad:T[P], m:T[P], v:T[P], hyper:f64[7]) -> ()"};

// Indices into hyper of optim.adam.step.
enum AdamHyper : int { kLr = 0, kBeta1, kBeta2, kEps, kWeightDecay, kStep, kReserved, kNumAdamHyper };

}  // namespace tessel::rgnn

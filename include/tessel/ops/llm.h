/* GPT-2 ops (provided by libtessel_llm.so): what a decoder block needs beyond the shared ops of
 * <tessel/ops/nn.h>. See <tessel/ops/op.h> for the declaration scheme. Activations are row-major
 * [B, S, C] (B sequences of S positions, width C), i.e. [N = B*S, C] rows. Every backward op ADDS its
 * parameter gradients into the given buffers (gradients accumulate over micro-batches; the caller zeroes
 * them once a step); what each does with its input gradient is said per op. Under bf16 (T = bf16, A =
 * f32) the activations and the weights the ops read are bf16, computed in f32 and rounded once where
 * they are stored; the LayerNorm statistics, the log-sum-exps and the parameter gradients are A.
 *
 * llm.encoder.fwd      Y[b,t] = wte[tokens[b,t]] + wpe[t]. A token outside [0, V) is bad data; S <= P.
 * llm.encoder.bwd      dwte[tokens[b,t]] += dY[b,t]; dwpe[t] += dY[b,t] (sums in a fixed order: the same
 *                      result whatever the threads).
 * llm.layernorm.fwd    per row: mean, rstd = 1 / sqrt(var + eps) (biased variance), Y = (X - mean) * rstd
 *                      * w + b; mean and rstd are kept for the backward (the input is too: it is the
 *                      residual stream, which is kept anyway).
 * llm.layernorm.bwd    dX += the gradient through the normalisation (ADDED: dX is the residual stream's
 *                      gradient), dw += sum over rows of dY * xhat, db += sum over rows of dY.
 * llm.layernorm.bwd_from_output  the same from the forward's output instead of its input (after Tempo):
 *                      xhat = (Y - b) / w, so a caller that keeps Y anyway (the next matmul's input) needs
 *                      neither X nor mean. Every w[j] must be nonzero (a zero is refused as invalid).
 * llm.attention.fwd    causal multi-head self-attention of GPT-2. qkv is [B, S, 3C]: per position the
 *                      query, key and value, each C = H * hs wide, head h at columns h*hs .. (h+1)*hs.
 *                      Y[b,t, head h] = sum_{u<=t} softmax_u(q_t . k_u / sqrt(hs)) v_u. lse[b,h,t] is the
 *                      row's log-sum-exp of the scaled scores: all the backward needs besides qkv and Y
 *                      (the S x S attention matrix is never kept, nor formed whole: the kernels work
 *                      FlashAttention-2 style, on tiles of queries by keys with an online softmax).
 * llm.attention.bwd    dqkv = the gradient with respect to qkv (WRITTEN, every element), recomputing the
 *                      probabilities tile by tile from qkv and lse.
 */
#ifndef TESSEL_OPS_LLM_H_
#define TESSEL_OPS_LLM_H_

#include "tessel/ops/op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessel_layernorm_params {
  size_t struct_size;
  double eps; /* GPT-2: 1e-5 */
} tessel_layernorm_params;

typedef struct tessel_attention_params {
  size_t struct_size;
  int32_t heads; /* H >= 1, dividing C */
} tessel_attention_params;

#define TESSEL_LLM_OPS(X)                                                                                              \
  X(llm_encoder_fwd, "llm.encoder.fwd", "llm.encoder.fwd(wte:T[V,C], wpe:T[P,C], tokens:i32[B,S]) -> (Y:T[B,S,C])", 0, \
    "")                                                                                                                \
  X(llm_encoder_bwd, "llm.encoder.bwd", "llm.encoder.bwd(dY:T[B,S,C], tokens:i32[B,S]) -> (dwte:A[V,C], dwpe:A[P,C])", \
    0, "")                                                                                                             \
  X(llm_layernorm_fwd, "llm.layernorm.fwd",                                                                            \
    "llm.layernorm.fwd(X:T[N,C], w:T[C], b:T[C]) -> (Y:T[N,C], mean:A[N], rstd:A[N])",                                 \
    sizeof(tessel_layernorm_params), "")                                                                               \
  X(llm_layernorm_bwd, "llm.layernorm.bwd",                                                                            \
    "llm.layernorm.bwd(dY:T[N,C], X:T[N,C], w:T[C], mean:A[N], rstd:A[N]) -> (dX:T[N,C], dw:A[C], db:A[C])", 0, "")    \
  X(llm_layernorm_bwd_from_output, "llm.layernorm.bwd_from_output",                                                    \
    "llm.layernorm.bwd_from_output(dY:T[N,C], Y:T[N,C], w:T[C], b:T[C], rstd:A[N]) -> (dX:T[N,C], dw:A[C], db:A[C])",  \
    0, "")                                                                                                             \
  X(llm_attention_fwd, "llm.attention.fwd", "llm.attention.fwd(qkv:T[B,S,Q]) -> (Y:T[B,S,C], lse:A[B,H,S])",           \
    sizeof(tessel_attention_params), "")                                                                               \
  X(llm_attention_bwd, "llm.attention.bwd",                                                                            \
    "llm.attention.bwd(dY:T[B,S,C], qkv:T[B,S,Q], Y:T[B,S,C], lse:A[B,H,S]) -> (dqkv:T[B,S,Q])",                       \
    sizeof(tessel_attention_params), "")

TESSEL_LLM_OPS(TESSEL_DECLARE_OP)

#ifdef __cplusplus
}
#endif

#endif /* TESSEL_OPS_LLM_H_ */

// The arguments of llm.attention.fwd/.bwd (<tessel/ops/llm.h>), bound and checked here once for their CPU
// and CUDA kernels (attention*) and every dtype: forward qkv [B, S, 3C] -> Y [B, S, C], lse [B, H, S];
// backward dY [B, S, C], qkv, Y, lse -> dqkv [B, S, 3C]; H = params.heads >= 1 divides C.
// Failure: Bind throws KernelError (invalid-argument, naming the op) for a shape, dtype or parameter
// that does not match.
#pragma once

#include <cstdint>
#include <string>

#include "kernels.h"

namespace tessel::kernels::llm {

// The sizes: qkv is [B, S, Q], Y [B, S, C], lse [B, H, S], with H = params.heads dividing C (head size
// hs = C / H >= 1) and Q = 3C.
struct AttentionShape {
  int64_t b = 0, s = 0, c = 0, h = 0, hs = 0, q = 0;
};

// Reads only the shapes of `qkv` and `y`; the binders then bind every tensor against these sizes.
inline AttentionShape CheckedAttentionShape(const KernelArgs& args, const tessel_tensor& qkv, const tessel_tensor& y) {
  const std::string op = args.op().name;
  if (qkv.ndim != 3 || y.ndim != 3) Fail(TESSEL_STATUS_INVALID_ARGUMENT, op + ": qkv and Y must be 3-D");
  AttentionShape s;
  s.b = qkv.shape[0];
  s.s = qkv.shape[1];
  s.q = qkv.shape[2];
  s.c = y.shape[2];
  s.h = args.Params<tessel_attention_params>().heads;
  if (s.h < 1) Fail(TESSEL_STATUS_INVALID_ARGUMENT, op + ": heads must be >= 1, is " + std::to_string(s.h));
  if (s.c < s.h || s.c % s.h != 0) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         op + ": C = " + std::to_string(s.c) + " is not a positive multiple of heads = " + std::to_string(s.h));
  }
  if (s.q != 3 * s.c) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         op + ": qkv is [B, S, Q] with Q = " + std::to_string(s.q) + ", expected 3C = " + std::to_string(3 * s.c));
  }
  s.hs = s.c / s.h;
  return s;
}

template <typename T>
struct AttentionFwdArgs {
  AttentionShape shape;
  const T* qkv = nullptr;
  T* y = nullptr;
  Accumulate<T>* lse = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_llm_attention_fwd; }

  static AttentionFwdArgs Bind(const KernelArgs& args) {
    AttentionFwdArgs a;
    a.shape = CheckedAttentionShape(args, args.in(0), args.out(0));
    int64_t b = a.shape.b, s = a.shape.s, c = a.shape.c, h = a.shape.h, q = a.shape.q;
    a.qkv = args.In<T>(0, "qkv", {&b, &s, &q});
    a.y = args.Out<T>(0, "Y", {&b, &s, &c});
    a.lse = args.Out<Accumulate<T>>(1, "lse", {&b, &h, &s});
    return a;
  }
};

template <typename T>
struct AttentionBwdArgs {
  AttentionShape shape;
  const T* dy = nullptr;
  const T* qkv = nullptr;
  const T* y = nullptr;
  const Accumulate<T>* lse = nullptr;
  T* dqkv = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_llm_attention_bwd; }

  static AttentionBwdArgs Bind(const KernelArgs& args) {
    AttentionBwdArgs a;
    a.shape = CheckedAttentionShape(args, args.in(1), args.in(0));
    int64_t b = a.shape.b, s = a.shape.s, c = a.shape.c, h = a.shape.h, q = a.shape.q;
    a.dy = args.In<T>(0, "dY", {&b, &s, &c});
    a.qkv = args.In<T>(1, "qkv", {&b, &s, &q});
    a.y = args.In<T>(2, "Y", {&b, &s, &c});
    a.lse = args.In<Accumulate<T>>(3, "lse", {&b, &h, &s});
    a.dqkv = args.Out<T>(0, "dqkv", {&b, &s, &q});
    return a;
  }
};

}  // namespace tessel::kernels::llm

// The arguments of llm.encoder.fwd/.bwd (<tessel/ops/llm.h>), bound and checked here once for their CPU
// and CUDA kernels (encoder*) and every dtype: forward wte [V, C], wpe [P, C], tokens [B, S] (i32) ->
// Y [B, S, C]; backward dY [B, S, C], tokens -> dwte [V, C], dwpe [P, C] (both added to).
// Failure: Bind throws KernelError: invalid-argument for a shape or dtype that does not match or S > P;
// bad-data for a token outside [0, V), naming the op, the position [b, t] and the value (checked where
// the tokens are host memory: on the CPU; the CUDA kernels never read through such a token).
#pragma once

#include <cstdint>
#include <string>

#include "kernels.h"

namespace tessel::kernels::llm {

// The S positions of a sequence must have rows in wpe (S <= P).
inline void CheckPositions(const KernelArgs& args, int64_t s, int64_t p) {
  if (s > p) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, std::string(args.op().name) + ": S = " + std::to_string(s) +
                                             " positions, but wpe has rows for P = " + std::to_string(p));
  }
}

// Every token in [0, V), where the tokens are host memory (DataCheck::kFull).
inline void CheckTokens(const KernelArgs& args, const int32_t* tokens, int64_t b, int64_t s, int64_t v) {
  if (args.data_check() != DataCheck::kFull) return;
  for (int64_t i = 0; i < b * s; ++i) {
    if (tokens[i] < 0 || tokens[i] >= v) {
      Fail(TESSEL_STATUS_BAD_DATA, std::string(args.op().name) + ": tokens[" + std::to_string(i / s) + ", " +
                                       std::to_string(i % s) + "] = " + std::to_string(tokens[i]) +
                                       " is out of range [0, " + std::to_string(v) + ")");
    }
  }
}

template <typename T>
struct EncoderFwdArgs {
  int64_t v = kUnbound, c = kUnbound, p = kUnbound, b = kUnbound, s = kUnbound;
  const T* wte = nullptr;
  const T* wpe = nullptr;
  const int32_t* tokens = nullptr;
  T* y = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_llm_encoder_fwd; }

  static EncoderFwdArgs Bind(const KernelArgs& args) {
    EncoderFwdArgs a;
    a.wte = args.In<T>(0, "wte", {&a.v, &a.c});
    a.wpe = args.In<T>(1, "wpe", {&a.p, &a.c});
    a.tokens = args.In<int32_t>(2, "tokens", {&a.b, &a.s});
    a.y = args.Out<T>(0, "Y", {&a.b, &a.s, &a.c});
    CheckPositions(args, a.s, a.p);
    CheckTokens(args, a.tokens, a.b, a.s, a.v);
    return a;
  }
};

template <typename T>
struct EncoderBwdArgs {
  int64_t b = kUnbound, s = kUnbound, c = kUnbound, v = kUnbound, p = kUnbound;
  const T* dy = nullptr;
  const int32_t* tokens = nullptr;
  Accumulate<T>* dwte = nullptr;
  Accumulate<T>* dwpe = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_llm_encoder_bwd; }

  static EncoderBwdArgs Bind(const KernelArgs& args) {
    EncoderBwdArgs a;
    a.dy = args.In<T>(0, "dY", {&a.b, &a.s, &a.c});
    a.tokens = args.In<int32_t>(1, "tokens", {&a.b, &a.s});
    a.dwte = args.Out<Accumulate<T>>(0, "dwte", {&a.v, &a.c});
    a.dwpe = args.Out<Accumulate<T>>(1, "dwpe", {&a.p, &a.c});
    CheckPositions(args, a.s, a.p);
    CheckTokens(args, a.tokens, a.b, a.s, a.v);
    return a;
  }
};

}  // namespace tessel::kernels::llm

// The arguments of llm.layernorm.fwd, .bwd and .bwd_from_output (<tessel/ops/llm.h>), bound and checked
// here once for their CPU and CUDA kernels (layernorm*) and every dtype: forward X [N, C], w, b [C] ->
// Y [N, C], mean, rstd [N], with eps finite and >= 0 and C >= 1; backward dY [N, C] with X and mean (bwd)
// or Y and b (bwd_from_output), w, rstd -> dX [N, C], dw, db [C].
// Failure: Bind throws KernelError (invalid-argument) for a shape, dtype or parameter that does not
// match, and for a zero in w when the backward rebuilds X from Y (checked where w is host memory: on the
// CPU; on the GPU a zero shows as inf/nan in dX).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels.h"

namespace tessel::kernels::llm {

template <typename T>
struct LayernormFwdArgs {
  int64_t n = kUnbound, c = kUnbound;
  Accumulate<T> eps = 0;
  const T* x = nullptr;
  const T* w = nullptr;
  const T* b = nullptr;
  T* y = nullptr;
  Accumulate<T>* mean = nullptr;
  Accumulate<T>* rstd = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_llm_layernorm_fwd; }

  static LayernormFwdArgs Bind(const KernelArgs& args) {
    const double eps = args.Params<tessel_layernorm_params>().eps;
    if (!(eps >= 0) || !std::isfinite(eps)) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT,
           std::string(args.op().name) + ": eps must be finite and >= 0, is " + std::to_string(eps));
    }
    LayernormFwdArgs a;
    a.eps = static_cast<Accumulate<T>>(eps);
    a.x = args.In<T>(0, "X", {&a.n, &a.c});
    a.w = args.In<T>(1, "w", {&a.c});
    a.b = args.In<T>(2, "b", {&a.c});
    a.y = args.Out<T>(0, "Y", {&a.n, &a.c});
    a.mean = args.Out<Accumulate<T>>(1, "mean", {&a.n});
    a.rstd = args.Out<Accumulate<T>>(2, "rstd", {&a.n});
    if (a.c == 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "llm.layernorm.fwd: C must be >= 1");
    return a;
  }
};

// What a backward rebuilds x - mean from: the input X and its mean (llm.layernorm.bwd), or the output Y
// as (Y - b) / (w rstd) (llm.layernorm.bwd_from_output).
enum class LayernormSaved { kInput, kOutput };

template <typename T>
struct LayernormBackwardArgs {
  int64_t n = kUnbound, c = kUnbound;
  LayernormSaved saved = LayernormSaved::kInput;
  const T* dy = nullptr;
  const T* x = nullptr;  // X, or Y when saved == kOutput
  const T* w = nullptr;
  const T* b = nullptr;                 // kOutput only, else null
  const Accumulate<T>* mean = nullptr;  // kInput only, else null
  const Accumulate<T>* rstd = nullptr;
  T* dx = nullptr;
  Accumulate<T>* dw = nullptr;
  Accumulate<T>* db = nullptr;

  static LayernormBackwardArgs BindSaved(const KernelArgs& args, LayernormSaved saved) {
    const bool from_output = saved == LayernormSaved::kOutput;
    LayernormBackwardArgs a;
    a.saved = saved;
    a.dy = args.In<T>(0, "dY", {&a.n, &a.c});
    a.x = args.In<T>(1, from_output ? "Y" : "X", {&a.n, &a.c});
    a.w = args.In<T>(2, "w", {&a.c});
    a.b = from_output ? args.In<T>(3, "b", {&a.c}) : nullptr;
    a.mean = from_output ? nullptr : args.In<Accumulate<T>>(3, "mean", {&a.n});
    a.rstd = args.In<Accumulate<T>>(4, "rstd", {&a.n});
    a.dx = args.Out<T>(0, "dX", {&a.n, &a.c});
    a.dw = args.Out<Accumulate<T>>(1, "dw", {&a.c});
    a.db = args.Out<Accumulate<T>>(2, "db", {&a.c});
    if (from_output && args.data_check() == DataCheck::kFull && a.n > 0 && a.c > 0) {
      for (int64_t j = 0; j < a.c; ++j) {
        if (ToAccumulate(a.w[j]) == 0) {
          Fail(TESSEL_STATUS_INVALID_ARGUMENT, std::string(args.op().name) + ": w has a zero: use llm.layernorm.bwd");
        }
      }
    }
    return a;
  }
};

template <typename T>
struct LayernormBwdArgs : LayernormBackwardArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_llm_layernorm_bwd; }
  static LayernormBackwardArgs<T> Bind(const KernelArgs& args) {
    return LayernormBackwardArgs<T>::BindSaved(args, LayernormSaved::kInput);
  }
};

template <typename T>
struct LayernormBwdFromOutputArgs : LayernormBackwardArgs<T> {
  static const tessel_op_decl& Decl() { return tessel_op_llm_layernorm_bwd_from_output; }
  static LayernormBackwardArgs<T> Bind(const KernelArgs& args) {
    return LayernormBackwardArgs<T>::BindSaved(args, LayernormSaved::kOutput);
  }
};

}  // namespace tessel::kernels::llm

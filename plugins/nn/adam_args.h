// The arguments of optim.adam.step, optim.adam.step_rows and optim.adamw.step (<tessel/ops/optim.h>),
// bound and checked here once for their CPU and CUDA kernels (adam*) and every dtype, with the update's
// per-step constants worked out once on the host, in double, then rounded to T (the same on CPU and
// CUDA).
// Failure: Bind throws KernelError: invalid-argument for a shape or dtype that does not match or a
// hyperparameter out of range; bad-data for a row_of entry past the gradient rows (checked where row_of
// is host memory: on the CPU).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels.h"
#include "row_ops.h"

namespace tessel::kernels::nn {

// optim.adam.step's update constants (row_ops.h, AdamConstants) from its parameters, checked: step >= 1,
// betas in [0, 1), eps and lr >= 0.
template <typename T>
AdamConstants<T> CheckedAdamConstants(const KernelArgs& args) {
  const tessel_adam_params& h = args.Params<tessel_adam_params>();
  if (h.step < 1) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "adam step must be >= 1, is " + std::to_string(h.step));
  if (!(h.beta1 >= 0 && h.beta1 < 1) || !(h.beta2 >= 0 && h.beta2 < 1) || !(h.eps >= 0) || !(h.lr >= 0)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, "adam needs 0 <= beta1, beta2 < 1, eps >= 0 and lr >= 0");
  }
  const double step = static_cast<double>(h.step);
  return AdamConstants<T>{static_cast<T>(h.lr / (1 - std::pow(h.beta1, step))),
                          static_cast<T>(std::sqrt(1 - std::pow(h.beta2, step))),
                          static_cast<T>(1 - h.beta1),
                          static_cast<T>(h.beta2),
                          static_cast<T>(1 - h.beta2),
                          static_cast<T>(h.weight_decay),
                          static_cast<T>(h.eps)};
}

// optim.adamw.step's update: g = grad_scale * grad; p *= decay; m = beta1 m + (1 - beta1) g;
// v = beta2 v + (1 - beta2) g^2; p -= step_size * m / (sqrt(v) / bias2_sqrt + eps).
template <typename T>
struct AdamwConstants {
  T grad_scale, decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bias2_sqrt, eps;
};

// optim.adamw.step's constants from its parameters, checked: step >= 1, betas in [0, 1), eps, lr and
// weight_decay >= 0, grad_scale >= 0 and finite.
template <typename T>
AdamwConstants<T> CheckedAdamwConstants(const KernelArgs& args) {
  const tessel_adamw_params& h = args.Params<tessel_adamw_params>();
  if (h.step < 1) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "adamw step must be >= 1, is " + std::to_string(h.step));
  if (!(h.beta1 >= 0 && h.beta1 < 1) || !(h.beta2 >= 0 && h.beta2 < 1) || !(h.eps >= 0) || !(h.lr >= 0) ||
      !(h.weight_decay >= 0)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, "adamw needs 0 <= beta1, beta2 < 1, eps >= 0, lr >= 0 and weight_decay >= 0");
  }
  if (!(h.grad_scale >= 0) || !std::isfinite(h.grad_scale)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         "adamw grad_scale must be finite and >= 0, is " + std::to_string(h.grad_scale));
  }
  const double step = static_cast<double>(h.step);
  return AdamwConstants<T>{static_cast<T>(h.grad_scale),
                           static_cast<T>(1 - h.lr * h.weight_decay),
                           static_cast<T>(h.beta1),
                           static_cast<T>(1 - h.beta1),
                           static_cast<T>(h.beta2),
                           static_cast<T>(1 - h.beta2),
                           static_cast<T>(h.lr / (1 - std::pow(h.beta1, step))),
                           static_cast<T>(std::sqrt(1 - std::pow(h.beta2, step))),
                           static_cast<T>(h.eps)};
}

// param, grad, m, v: [P] each; param, m and v are updated in place.
template <typename T, typename Constants>
struct ElementwiseStep {
  int64_t p = kUnbound;
  T* param = nullptr;
  const T* grad = nullptr;
  T* m = nullptr;
  T* v = nullptr;
  Constants c{};

  static ElementwiseStep BindTensors(const KernelArgs& args) {
    ElementwiseStep a;
    a.param = args.InMutable<T>(0, "param", {&a.p});
    a.grad = args.In<T>(1, "grad", {&a.p});
    a.m = args.InMutable<T>(2, "m", {&a.p});
    a.v = args.InMutable<T>(3, "v", {&a.p});
    return a;
  }
};

template <typename T>
struct AdamStepArgs : ElementwiseStep<T, AdamConstants<T>> {
  static const tessel_op_decl& Decl() { return tessel_op_optim_adam_step; }
  static ElementwiseStep<T, AdamConstants<T>> Bind(const KernelArgs& args) {
    auto a = ElementwiseStep<T, AdamConstants<T>>::BindTensors(args);
    a.c = CheckedAdamConstants<T>(args);
    return a;
  }
};

template <typename T>
struct AdamwStepArgs : ElementwiseStep<T, AdamwConstants<T>> {
  static const tessel_op_decl& Decl() { return tessel_op_optim_adamw_step; }
  static ElementwiseStep<T, AdamwConstants<T>> Bind(const KernelArgs& args) {
    auto a = ElementwiseStep<T, AdamwConstants<T>>::BindTensors(args);
    a.c = CheckedAdamwConstants<T>(args);
    return a;
  }
};

// param, m, v [P, D]; grad_rows [Z, D]; row_of [P]: row p's gradient is grad_rows[row_of[p]], or zero
// when row_of[p] < 0.
template <typename T>
struct AdamStepRowsArgs {
  int64_t p = kUnbound, d = kUnbound, z = kUnbound;
  T* param = nullptr;
  const T* grad_rows = nullptr;
  const int32_t* row_of = nullptr;
  T* m = nullptr;
  T* v = nullptr;
  AdamConstants<T> c{};

  static const tessel_op_decl& Decl() { return tessel_op_optim_adam_step_rows; }

  static AdamStepRowsArgs Bind(const KernelArgs& args) {
    AdamStepRowsArgs a;
    a.param = args.InMutable<T>(0, "param", {&a.p, &a.d});
    a.grad_rows = args.In<T>(1, "grad_rows", {&a.z, &a.d});
    a.row_of = args.In<int32_t>(2, "row_of", {&a.p});
    a.m = args.InMutable<T>(3, "m", {&a.p, &a.d});
    a.v = args.InMutable<T>(4, "v", {&a.p, &a.d});
    if (args.data_check() == DataCheck::kFull) {
      for (int64_t i = 0; i < a.p; ++i) {
        if (a.row_of[i] >= a.z) {
          Fail(TESSEL_STATUS_BAD_DATA, "row_of[" + std::to_string(i) + "] = " + std::to_string(a.row_of[i]) +
                                           " is past the " + std::to_string(a.z) + " gradient rows");
        }
      }
    }
    a.c = CheckedAdamConstants<T>(args);
    return a;
  }
};

}  // namespace tessel::kernels::nn

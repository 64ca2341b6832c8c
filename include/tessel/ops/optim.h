/* Optimiser ops (provided by libtessel_nn.so). See <tessel/ops/op.h> for the declaration scheme.
 *
 * optim.adam.step      IN PLACE on param, m and v (all inputs; there are no outputs), as torch.optim.Adam
 *                      with coupled L2 weight decay: g = grad + weight_decay * param;
 *                      m += (1 - beta1)(g - m); v = beta2 v + (1 - beta2) g^2;
 *                      param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps).
 *                      step is 1-based. Invalid hyperparameters are an invalid-argument error.
 * optim.adam.step_rows the same update for a [P, D] parameter whose gradient is zero except on some rows:
 *                      row p's gradient is grad_rows[row_of[p]] when row_of[p] >= 0, else 0 (weight decay
 *                      and the moments still move every row, as a dense zero gradient would). Reads and
 *                      writes param, m and v once and only the given gradient rows: for embedding tables,
 *                      whose dense gradient would be mostly zeros.
 * optim.adamw.step     IN PLACE on param, m and v, as torch.optim.AdamW (decoupled weight decay), with the
 *                      gradient first multiplied by grad_scale (gradient clipping; 1 = none):
 *                      g = grad_scale * grad; param *= 1 - lr * weight_decay;
 *                      m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
 *                      param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps).
 */
#ifndef TESSEL_OPS_OPTIM_H_
#define TESSEL_OPS_OPTIM_H_

#include "tessel/ops/op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessel_adam_params {
  size_t struct_size;
  double lr;
  double beta1;
  double beta2;
  double eps;
  double weight_decay;
  int64_t step; /* 1-based */
} tessel_adam_params;

typedef struct tessel_adamw_params {
  size_t struct_size;
  double lr;
  double beta1;
  double beta2;
  double eps;
  double weight_decay; /* decoupled: param *= 1 - lr * weight_decay */
  double grad_scale;   /* multiplies the gradient (clipping); 1 = none */
  int64_t step;        /* 1-based */
} tessel_adamw_params;

#define TESSEL_OPTIM_OPS(X)                                                                                \
  X(optim_adam_step, "optim.adam.step", "optim.adam.step(param:T[P], grad:T[P], m:T[P], v:T[P]) -> ()",    \
    sizeof(tessel_adam_params), "")                                                                        \
  X(optim_adam_step_rows, "optim.adam.step_rows",                                                          \
    "optim.adam.step_rows(param:T[P,D], grad_rows:T[Z,D], row_of:i32[P], m:T[P,D], v:T[P,D]) -> ()",       \
    sizeof(tessel_adam_params), "")                                                                        \
  X(optim_adamw_step, "optim.adamw.step", "optim.adamw.step(param:T[P], grad:T[P], m:T[P], v:T[P]) -> ()", \
    sizeof(tessel_adamw_params), "")

TESSEL_OPTIM_OPS(TESSEL_DECLARE_OP)

#ifdef __cplusplus
}
#endif

#endif /* TESSEL_OPS_OPTIM_H_ */

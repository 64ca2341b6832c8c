/* Optimiser ops (provided by libtessel_nn.so). See <tessel/ops/op.h> for the declaration scheme.
 *
 * optim.adam.step      IN PLACE on param, m and v (all inputs; there are no outputs), as torch.optim.Adam
 *                      with coupled L2 weight decay: g = grad + weight_decay * param;
 *                      m += (1 - beta1)(g - m); v = beta2 v + (1 - beta2) g^2;
 *                      param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps).
 *                      step is 1-based. Invalid hyperparameters are an invalid-argument error.
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

#define TESSEL_OPTIM_OPS(X)                                                                                  \
  X(optim_adam_step, "optim.adam.step", "optim.adam.step(param:T[P], grad:T[P], m:T[P], v:T[P]) -> ()",     \
    sizeof(tessel_adam_params), "")

TESSEL_OPTIM_OPS(TESSEL_DECLARE_OP)

#ifdef __cplusplus
}
#endif

#endif /* TESSEL_OPS_OPTIM_H_ */

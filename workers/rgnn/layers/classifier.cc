#include "workers/rgnn/layers/classifier.h"

#include <tessel/ops/nn.h>

namespace tessel::workers {

Classifier::Classifier(int64_t in_dim, int64_t classes, const KernelSet& kernels, ParameterStore& params)
    : k_(kernels), params_(params) {
  weight_ = params.Add({"classifier.weight", {in_dim, classes}, ParamInit::kWeight, Decay::kNone});
}

std::vector<const tessel_op_decl*> Classifier::Ops() { return {&tessel_op_nn_gemm}; }

Status Classifier::Forward(const Tensor& h, Tensor& logits) {
  return k_.Call(tessel_op_nn_gemm, {&h, &params_.value(weight_)}, {&logits},
                 tessel_gemm_params{sizeof(tessel_gemm_params), 0, 0, 1.0, 0.0});
}

Status Classifier::Backward(const Tensor& dlogits, const Tensor& h, Tensor& dh) {
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gemm, {&h, &dlogits}, {&params_.grad(weight_)},
                                 tessel_gemm_params{sizeof(tessel_gemm_params), 1, 0, 1.0, 0.0}));
  return k_.Call(tessel_op_nn_gemm, {&dlogits, &params_.value(weight_)}, {&dh},
                 tessel_gemm_params{sizeof(tessel_gemm_params), 0, 1, 1.0, 0.0});
}

}  // namespace tessel::workers

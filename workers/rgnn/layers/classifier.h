// The linear classifier after the HGT layers (workers/rgnn/MODELS.md): logits = h classifier.weight, over
// the owned rows. Plain nn.gemm forward and backward.
#pragma once

#include "workers/kernel_set.h"
#include "workers/params/parameter_store.h"

namespace tessel::workers {

class Classifier {
 public:
  Classifier(int64_t in_dim, int64_t classes, const KernelSet& kernels, ParameterStore& params);
  static std::vector<const tessel_op_decl*> Ops();

  // h: [N, in] -> logits: [N, classes]
  Status Forward(const Tensor& h, Tensor& logits);
  // dlogits -> dh (overwritten), and the weight's gradient.
  Status Backward(const Tensor& dlogits, const Tensor& h, Tensor& dh);

 private:
  const KernelSet& k_;
  ParameterStore& params_;
  size_t weight_;
};

}  // namespace tessel::workers

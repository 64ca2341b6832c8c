// RGCN layer (Schlichtkrull et al. 2018; workers/rgnn/MODELS.md):
//   h_i = sum_r sum_{j in N_r(i)} (1 / |N_r(i)|) X_j W_r
// through the compact kernels: the typed linear once per unique (relation, source) pair (or the
// one-hot lookup), then the normalised aggregation into the destinations.
#pragma once

#include <memory>

#include "workers/params/parameter_store.h"
#include "workers/rgnn/full_graph_source.h"
#include "workers/rgnn/kernel_set.h"
#include "workers/rgnn/layers/layer.h"

namespace tessel::workers {

class RgcnLayer final : public RgnnLayer {
 public:
  // Declares "layer<index>.weight" [R, in_dim, out_dim] (decayed when index == 0). A one-hot layer reads
  // the source rows' global ids instead of x, and in_dim is the number of nodes.
  RgcnLayer(int index, int64_t in_dim, int64_t out_dim, bool one_hot, const FullGraphSource& graph,
            const KernelSet& kernels, ParameterStore& params);

  static std::vector<const tessel_op_decl*> Ops(bool one_hot);

  int64_t out_dim() const override { return out_dim_; }
  Status Forward(const Tensor& x, Tensor& out) override;
  Status Backward(Tensor& dout, const Tensor& x, Tensor* dx) override;

 private:
  Status EnsureBuffers();

  int64_t in_dim_, out_dim_;
  bool one_hot_;
  const FullGraphSource& graph_;
  const KernelSet& k_;
  ParameterStore& params_;
  size_t weight_;
  Tensor y_;  // [U, out]: the per-pair products, reused for their gradient in backward
};

}  // namespace tessel::workers

// RgnnLayer: one message-passing layer of a relational GNN, forward and backward through plugin ops.
// A layer declares its parameters in the model's ParameterStore when it is made, and reads and writes
// them (values, gradients) through the store once it is allocated. It sees the graph through the batch
// source (today the full graph; the sampled source next): its input has one row per source row
// (owned + halo), its output one row per destination (owned) row.
//
// Ownership: a layer borrows the batch source, the kernel set and the parameter store, which the
// executor owns and keeps alive longer. Thread safety: one thread. Failure: Status from the kernels.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"

namespace tessel::workers {

class RgnnLayer {
 public:
  virtual ~RgnnLayer() = default;
  virtual int64_t out_dim() const = 0;
  // Whether Backward reads the `out` its Forward wrote (then the executor keeps it intact until then).
  virtual bool reads_own_output() const { return false; }

  // x: [rows, in] (ignored when the layer reads a one-hot input); out: [owned, out_dim()], overwritten.
  virtual Status Forward(const Tensor& x, Tensor& out) = 0;
  // dout: [owned, out_dim()], which the layer may overwrite; x: the input of Forward; dx: [rows, in] to
  // overwrite with the input gradient, or null when none is needed (the first layer). Writes (not adds)
  // the gradients of the layer's parameters into the store.
  virtual Status Backward(Tensor& dout, const Tensor& x, Tensor* dx) = 0;
};

}  // namespace tessel::workers

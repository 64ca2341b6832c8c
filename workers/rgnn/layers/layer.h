// RgnnLayer: one message-passing layer of a relational GNN, forward and backward through plugin ops.
// A layer declares its parameters in the model's ParameterStore when it is made, and reads and writes
// them (values, gradients) through the store once it is allocated. It sees the graph through the view it
// is bound to (graph_view.h): its input has one row per input row of the view (owned + halo, or a
// mini-batch's sampled sources), its output one row per destination (owned) row.
//
// Ownership: a layer borrows the bound view, the kernel set and the parameter store, which the executor
// owns and keeps alive longer. Thread safety: one thread. Failure: Status from the kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "core/allocator.h"
#include "core/status.h"
#include "core/tensor.h"
#include "workers/rgnn/graph_view.h"

namespace tessel::workers {

// Memory that grows to the largest size asked of it and hands out views of exactly the shape asked for:
// the buffers of a layer whose graph changes from mini-batch to mini-batch.
class GrowBuffer {
 public:
  Result<Tensor> View(std::vector<int64_t> shape, DType dtype, Allocator& alloc) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    const int64_t bytes = n * static_cast<int64_t>(DTypeSize(dtype));
    if (storage_.raw() == nullptr || static_cast<int64_t>(storage_.nbytes()) < bytes) {
      storage_ = Tensor();  // the old block goes back before the bigger one is taken
      TESSEL_ASSIGN_OR_RETURN(storage_, Tensor::Empty(DType::kU8, {std::max<int64_t>(bytes, 1)}, alloc));
    }
    return Tensor::Borrow(storage_.raw(), dtype, std::move(shape), storage_.device());
  }
  int64_t bytes() const { return static_cast<int64_t>(storage_.nbytes()); }
  // bytes(), or 0 when `counted` has this buffer already (it is added).
  int64_t CountOnce(std::set<const void*>& counted) const { return counted.insert(this).second ? bytes() : 0; }

 private:
  Tensor storage_;
};

class RgnnLayer {
 public:
  virtual ~RgnnLayer() = default;
  virtual int64_t out_dim() const = 0;
  // Points the layer at the graph of its next Forward and Backward and sizes its buffers for it (they
  // only grow). The parameters must be allocated. The executor binds every layer of a model before the
  // first Forward of a pass, and keeps the view alive until the next Bind.
  virtual Status Bind(const GraphView& graph) {
    graph_ = &graph;
    return Status();
  }
  // Whether Backward reads the `out` its Forward wrote (then the executor keeps it intact until then).
  virtual bool reads_own_output() const { return false; }
  // Bytes of the layer's own buffers (what its Forward keeps for its Backward, and its scratch), for
  // tessel_memory_bytes{kind="activations"}: each buffer's address goes into `counted` once, so that
  // buffers the layers of a model share are counted once.
  virtual int64_t BufferBytes(std::set<const void*>& counted) const {
    (void)counted;
    return 0;
  }

  // x: [rows, in] (ignored when the layer reads a one-hot input); out: [owned, out_dim()], overwritten.
  virtual Status Forward(const Tensor& x, Tensor& out) = 0;
  // dout: [owned, out_dim()], which the layer may overwrite; x: the input of Forward; dx: [rows, in] to
  // overwrite with the input gradient, or null when none is needed (the first layer). Writes (not adds)
  // the gradients of the layer's parameters into the store.
  virtual Status Backward(Tensor& dout, const Tensor& x, Tensor* dx) = 0;
  // As Backward, but adds the parameter gradients to those in the store, and leaves `dout` as it was: for a
  // model whose layers sum over their input rows (RgnnModel::StreamsHalo), run once per block of them.
  virtual Status BackwardAdd(Tensor& dout, const Tensor& x, Tensor* dx) {
    (void)dout, (void)x, (void)dx;
    return InternalError("this layer does not sum over its input rows (train.halo = \"streamed\")");
  }

 protected:
  const GraphView* graph_ = nullptr;
};

}  // namespace tessel::workers

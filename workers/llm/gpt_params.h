// GptParams: one pipeline stage's parameters and their optimizer. The stage holds llm.c's tensors of its
// blocks, plus the embeddings (wte, wpe) on the first stage and the final LayerNorm and the output head's
// copy of the tied wte on the last; their initial values (GPT-2's, from the job seed, or an llm.c
// checkpoint); and AdamW over them, after the replicas' gradient sum, the tied-embedding exchange and the
// global-norm clip. Under train.precision = "bf16" the kernels read a bf16 working copy of the values,
// rounded from the f32 master values (nn.cast) after every update; the gradients, moments and the master
// values stay f32, as llm.c's mixed-precision trainer and PyTorch autocast keep them.
//
// Ownership: owns the values, gradients and moments; borrows the assignment, kernels and device, which
// outlive it. Thread safety: one thread. Failure: kUsage for a checkpoint of another shape, kernel and
// communication errors as they come.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "workers/comm/comm.h"
#include "workers/executor.h"
#include "workers/kernel_set.h"
#include "workers/llm/llm_settings.h"
#include "workers/llm/stage_link.h"
#include "workers/params/parameter_store.h"

namespace tessel::workers {

// One block's parameters (indices into the ParameterStore), in llm.c's order.
struct BlockParams {
  size_t ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

class GptParams {
 public:
  GptParams(const LlmStageAssignment& a, uint64_t seed, KernelSet& kernels, const DeviceContext& device)
      : a_(a), seed_(seed), k_(kernels), device_(device) {}

  // Declares the stage's tensors, allocates them with zero gradients and moments, and sets their initial
  // values.
  Status Init();

  // What the kernels read: the values, or under bf16 their working copy.
  const Tensor& value(size_t i) const { return work_views_.empty() ? store_.value(i) : work_views_[i]; }
  Tensor& grad(size_t i) { return store_.grad(i); }
  const ParameterStore& store() const { return store_; }
  size_t wte() const { return wte_; }
  size_t wpe() const { return wpe_; }
  size_t lnfw() const { return lnfw_; }
  size_t lnfb() const { return lnfb_; }
  const std::vector<BlockParams>& blocks() const { return blocks_; }
  // Bytes held: the f32 values and their bf16 working copy; the gradients and the tied embedding's;
  // AdamW's moments.
  int64_t value_bytes() const { return static_cast<int64_t>(store_.flat_value().nbytes() + work_.nbytes()); }
  int64_t grad_bytes() const {
    return store_.num_grad_values() * static_cast<int64_t>(sizeof(float)) + static_cast<int64_t>(tied_.nbytes());
  }
  int64_t optimizer_bytes() const { return static_cast<int64_t>(m_.nbytes() + v_.nbytes()); }

  // One AdamW update of 1-based `step` from the accumulated gradients, which it then zeroes: the sum over
  // this stage's replicas (`replicas`), the tied embedding's exchange between the first and last stage of
  // `worker`'s replica (through `link`; the seconds waited are added to *waited), the global norm over
  // every stage (`world`) clipped to train.grad_clip, and llm.c's learning rate.
  Status Step(int64_t step, int worker, WorkerComm& world, WorkerComm& replicas, StageLink& link, double* waited);

  // The values in declaration order on the host, without the head's wte copy (the first stage's):
  // what stage_weights.h writes.
  Result<std::vector<float>> HostValues() const;

  // The values and AdamW's moments ("param/...", "adamw/m", "adamw/v").
  Status SaveState(StateWriter& out) const;
  Status LoadState(StateReader& in);

 private:
  Status Declare();
  Status InitialValues(std::vector<float>* host) const;
  // Rounds the master values into the bf16 working copy (nothing under fp32).
  Status RefreshWorkingCopy();

  const LlmStageAssignment& a_;
  uint64_t seed_;
  KernelSet& k_;
  DeviceContext device_;
  ParameterStore store_;
  size_t wte_ = 0, wpe_ = 0, lnfw_ = 0, lnfb_ = 0;
  std::vector<BlockParams> blocks_;
  Tensor m_, v_;                    // AdamW moments, flat like the parameters
  Tensor sumsq_;                    // the squared gradient norm (f64 [1])
  Tensor tied_;                     // the other stage's wte gradient (first and last stage of a multi-stage replica)
  Tensor work_;                     // bf16: the working copy, flat like the values; empty under fp32
  std::vector<Tensor> work_views_;  // bf16: one view of work_ per parameter
};

}  // namespace tessel::workers

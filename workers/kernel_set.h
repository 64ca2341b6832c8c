// KernelSet: the kernels an executor calls, found once on its device, and called with its call options
// (pool, stream, device, workspace budget). Ops are named by their SDK declaration, so a typo is a
// compile error, not a runtime lookup failure.
//
//   KernelSet k(*context.kernels, context);
//   TESSEL_RETURN_IF_ERROR(k.Require(ops));            // every op, on the device, before training
//   TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_relu_fwd, {&x}, {&y}));
//
// Ownership: borrows the registry and the context's pool and budget; owns the pool of workspace blocks
// its CPU kernels reuse across steps (charged to the budget). Thread safety: one thread.
#pragma once

#include <tessel/ops/op.h>

#include <map>
#include <string>
#include <vector>

#include "workers/executor.h"

namespace tessel::workers {

class KernelSet {
 public:
  KernelSet(const KernelRegistry& registry, const ExecutorContext& context);

  // Checks that every op has a kernel on the device with the declared schema (one error listing all).
  Status Require(const std::vector<const tessel_op_decl*>& ops);
  // Checks that each op's kernel on the device takes `dtype` as its T (kPlugin naming the ops and their
  // plugins, and `why`, the setting that asks for it).
  Status RequireDType(const std::vector<const tessel_op_decl*>& ops, DType dtype, std::string_view why);

  Status Call(const tessel_op_decl& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs) const;
  template <typename P>
  Status Call(const tessel_op_decl& op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
              const P& params) const {
    TESSEL_ASSIGN_OR_RETURN(const Kernel* kernel, Find(op));
    return kernel->Call(inputs, outputs, params, options_);
  }

  Result<const Kernel*> Find(const tessel_op_decl& op) const;
  const CallOptions& options() const { return options_; }
  Device device() const { return device_; }

 private:
  const KernelRegistry* registry_;
  Device device_;
  WorkspacePool workspace_;  // CPU kernels' scratch, reused from step to step
  CallOptions options_;
  mutable std::map<std::string, const Kernel*, std::less<>> found_;
};

}  // namespace tessel::workers

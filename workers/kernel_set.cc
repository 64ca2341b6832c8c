#include "workers/kernel_set.h"

namespace tessel::workers {

KernelSet::KernelSet(const KernelRegistry& registry, const ExecutorContext& context)
    : registry_(&registry), device_(context.device.device), workspace_(context.budget) {
  options_.pool = context.pool;
  options_.cuda_stream = context.device.stream;
  options_.device_ordinal = context.device.ordinal;
  options_.budget = context.budget;
  options_.workspace_pool = &workspace_;
  options_.timer = context.kernel_timer;
}

Status KernelSet::Require(const std::vector<const tessel_op_decl*>& ops) {
  std::vector<std::string> names;
  for (const tessel_op_decl* op : ops) names.emplace_back(op->name);
  return registry_->RequireOps(names, device_);
}

Status KernelSet::RequireDType(const std::vector<const tessel_op_decl*>& ops, DType dtype, std::string_view why) {
  std::string missing;
  for (const tessel_op_decl* op : ops) {
    TESSEL_ASSIGN_OR_RETURN(const Kernel* kernel, Find(*op));
    if (!kernel->AcceptsFloating(dtype)) {
      missing += StrCat(missing.empty() ? "" : ", ", op->name, " (", kernel->plugin_path(), ")");
    }
  }
  if (missing.empty()) return Status();
  return PluginError(StrCat(why, " needs ", DTypeName(dtype), " kernels on ", DeviceName(device_),
                            ", but these take no ", DTypeName(dtype), ": ", missing));
}

Result<const Kernel*> KernelSet::Find(const tessel_op_decl& op) const {
  if (auto it = found_.find(op.name); it != found_.end()) return it->second;
  TESSEL_ASSIGN_OR_RETURN(const Kernel* kernel, registry_->Find(op.name, device_));
  found_.emplace(op.name, kernel);
  return kernel;
}

Status KernelSet::Call(const tessel_op_decl& op, const std::vector<const Tensor*>& inputs,
                       const std::vector<Tensor*>& outputs) const {
  TESSEL_ASSIGN_OR_RETURN(const Kernel* kernel, Find(op));
  return kernel->Call(inputs, outputs, options_);
}

}  // namespace tessel::workers

// Kernel: one (op, device) implementation registered by a loaded plugin, callable with Tensors.
// Ownership: a Kernel is owned by the KernelRegistry that loaded its plugin and is valid for the
// registry's lifetime; callers hold `const Kernel*`. Thread safety: Call may run concurrently on
// different kernels; the ABI allows one call at a time per kernel unless its plugin documents more
// (the rgnn plugin's kernels are reentrant). Failure: see Call.
#pragma once

#include <tessel/plugin.h>

#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "workers/plugin_host/schema.h"

namespace tessel::workers {

class Kernel {
 public:
  Kernel(std::string op, Device device, std::string schema_text, Schema schema, std::vector<OutputRows> output_rows,
         tessel_kernel_fn fn, void* state, std::string plugin_path);
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  const std::string& op() const { return op_; }
  Device device() const { return device_; }
  const std::string& schema() const { return schema_text_; }
  const Schema& parsed_schema() const { return schema_; }
  const std::string& plugin_path() const { return plugin_path_; }

  // Runs the kernel. The tensors are checked against the schema first (count, dtype, rank, device,
  // sizes; an InternalError names the argument). Inputs are read-only except where the op says
  // otherwise (optim.adam.step updates param, m and v in place); outputs must be preallocated with the
  // schema's shapes. `pool` backs the plugin's parallel_for; null runs everything on this thread.
  // CUDA kernels are queued on `cuda_stream` (null: the default stream) and may still be running when
  // Call returns. A plugin's error comes back with its code and "plugin P op O: message"; an
  // exception that escapes a plugin is caught and reported as kInternal.
  Status Call(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs, ThreadPool* pool) const;
  Status Call(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs, ThreadPool* pool,
              void* cuda_stream) const;

 private:
  std::string op_;
  Device device_;
  std::string schema_text_;
  Schema schema_;
  std::vector<OutputRows> output_rows_;
  tessel_kernel_fn fn_;
  void* state_;
  std::string plugin_path_;
  std::string context_;  // "plugin P op O", the prefix of every error
};

}  // namespace tessel::workers

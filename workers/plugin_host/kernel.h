// Kernel: one (op, device) implementation registered by a loaded plugin, callable with Tensors.
// Ownership: a Kernel is owned by the KernelRegistry that loaded its plugin and is valid for the
// registry's lifetime; callers hold `const Kernel*`. Thread safety: Call may run concurrently on
// different kernels; the ABI allows one call at a time per kernel unless its plugin documents more
// (the rgnn plugin's kernels are reentrant). Failure: see Call.
#pragma once

#include <tessel/plugin.h>

#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "workers/plugin_host/kernel_timer.h"
#include "workers/plugin_host/schema.h"
#include "workers/plugin_host/workspace_pool.h"

namespace tessel::workers {

// How one call runs: the host services it gets (tessel_kernel_call's pool, stream, device and workspace).
struct CallOptions {
  ThreadPool* pool = nullptr;      // backs the plugin's parallel_for; null runs everything on this thread
  void* cuda_stream = nullptr;     // CUDA kernels: the stream to queue on (null: the default stream)
  int32_t device_ordinal = 0;      // CUDA kernels: the device of the tensors
  MemoryBudget* budget = nullptr;  // charged for workspace memory; null: unlimited
  // CPU kernels: host workspace comes from (and goes back to) this pool, charged to its own budget;
  // null: allocated and freed per call, charged to `budget`.
  WorkspacePool* workspace_pool = nullptr;
  KernelTimer* timer = nullptr;  // times the call on its sampled steps; null: never timed
};

class Kernel {
 public:
  Kernel(std::string op, Device device, std::string schema_text, Schema schema, std::vector<OutputRows> output_rows,
         tessel_kernel_fn fn, void* state, std::string plugin_path, size_t params_size = 0,
         uint32_t floating_dtypes = 0);
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
  //
  // `params` is the op's parameter struct (<tessel/ops/...>), whose size must be the op's declared one;
  // null for ops without parameters. Workspace memory a kernel asks for is charged to options.budget
  // and given back when the call returns (on CUDA in stream order, after the work the kernel queued).
  Status Call(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs, const CallOptions& options,
              const void* params = nullptr, size_t params_size = 0) const;
  template <typename P>
  Status Call(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs, const P& params,
              const CallOptions& options) const {
    return Call(inputs, outputs, options, &params, sizeof(P));
  }
  Status Call(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs, ThreadPool* pool) const {
    return Call(inputs, outputs, CallOptions{pool, nullptr, 0, nullptr, nullptr, nullptr});
  }
  template <typename P>
  Status Call(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs, const P& params,
              ThreadPool* pool) const {
    return Call(inputs, outputs, CallOptions{pool, nullptr, 0, nullptr, nullptr, nullptr}, &params, sizeof(P));
  }

  size_t params_size() const { return params_size_; }
  // Whether T may be `dtype` in a call (the registration's floating dtypes; f32 and f64 for a 1.0 kernel).
  bool AcceptsFloating(DType dtype) const {
    return (floating_dtypes_ & TESSEL_DTYPE_BIT(static_cast<int>(dtype))) != 0;
  }

 private:
  Status Run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs, const CallOptions& options,
             const void* params, size_t params_size) const;

  std::string op_;
  Device device_;
  std::string schema_text_;
  Schema schema_;
  std::vector<OutputRows> output_rows_;
  tessel_kernel_fn fn_;
  void* state_;
  std::string plugin_path_;
  size_t params_size_;
  uint32_t floating_dtypes_;  // TESSEL_DTYPE_BIT()s the kernel accepts for T
  std::string context_;       // "plugin P op O", the prefix of every error
};

}  // namespace tessel::workers

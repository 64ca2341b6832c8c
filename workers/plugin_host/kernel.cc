#include "workers/plugin_host/kernel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <utility>

#include "core/activity.h"
#include "core/logging.h"
#include "workers/plugin_host/host_status.h"

namespace tessel::workers {
namespace {

// The host_ctx of one call: the services a kernel reaches through tessel_kernel_call.
struct CallContext {
  ThreadPool* pool = nullptr;
  std::atomic<bool> pool_busy{false};  // set while a parallel_for of this call runs on the pool
  std::mutex error_mu;
  std::string callback_error;  // the first exception that escaped a plugin range function
  // Workspace: the kernel's device, its stream, the budget, and what is still allocated (freed at the end).
  Device device = Device::kCpu;
  void* stream = nullptr;
  MemoryBudget* budget = nullptr;
  WorkspacePool* pool_of_workspace = nullptr;  // host blocks come from and go back to it
  std::mutex workspace_mu;
  std::vector<std::pair<void*, size_t>> workspace;

  void FreeBlock(void* ptr, size_t bytes) {
    if (pool_of_workspace != nullptr) {
      pool_of_workspace->Give({ptr, bytes});
      return;
    }
    if (device == Device::kCuda) {
      CudaFreeAsync(ptr, stream);
    } else {
      HostAllocator().Free(ptr);
    }
    if (budget != nullptr) budget->Release(static_cast<int64_t>(bytes));
  }
  ~CallContext() {
    for (auto& [ptr, bytes] : workspace) FreeBlock(ptr, bytes);
  }
};

void RecordCallbackError(CallContext* ctx, std::string what) {
  std::lock_guard<std::mutex> lock(ctx->error_mu);
  if (ctx->callback_error.empty()) ctx->callback_error = std::move(what);
}

// Runs a plugin's range function; an exception that escapes it (a plugin bug) is recorded, not
// propagated into the thread pool.
void RunRange(CallContext* ctx, tessel_range_fn fn, void* fn_ctx, int64_t begin, int64_t end) noexcept {
  try {
    fn(fn_ctx, begin, end);
  } catch (const std::exception& e) {
    RecordCallbackError(ctx, StrCat("exception thrown across the ABI boundary in parallel_for: ", e.what()));
  } catch (...) {
    RecordCallbackError(ctx, "unknown exception thrown across the ABI boundary in parallel_for");
  }
}

void HostParallelFor(void* host_ctx, int64_t n, int64_t grain, tessel_range_fn fn, void* fn_ctx) noexcept {
  auto* ctx = static_cast<CallContext*>(host_ctx);
  if (n <= 0 || fn == nullptr) return;
  bool expected = false;
  // The pool is not reentrant: a nested or concurrent parallel_for of the same call runs inline.
  if (ctx->pool == nullptr || !ctx->pool_busy.compare_exchange_strong(expected, true)) {
    RunRange(ctx, fn, fn_ctx, 0, n);
    return;
  }
  try {
    ctx->pool->ParallelFor(n, grain, [&](int64_t begin, int64_t end) { RunRange(ctx, fn, fn_ctx, begin, end); });
  } catch (...) {
    RecordCallbackError(ctx, "the host thread pool failed");
  }
  ctx->pool_busy.store(false);
}

tessel_status* HostCallMakeStatus(void* /*host_ctx*/, int32_t code, const char* message) noexcept {
  return MakeHostStatus(code, message);
}

void* HostWorkspaceAlloc(void* host_ctx, size_t bytes, tessel_status** status) noexcept {
  auto* ctx = static_cast<CallContext*>(host_ctx);
  const auto fail = [&](const std::string& message) -> void* {
    if (status != nullptr) *status = MakeHostStatus(TESSEL_STATUS_INTERNAL, message.c_str());
    return nullptr;
  };
  try {
    if (ctx->pool_of_workspace != nullptr) {
      Result<WorkspacePool::Block> block = ctx->pool_of_workspace->Take(bytes);
      if (!block.ok()) return fail(block.status().message());
      std::lock_guard<std::mutex> lock(ctx->workspace_mu);
      ctx->workspace.emplace_back(block->ptr, block->capacity);
      return block->ptr;
    }
    if (ctx->budget != nullptr && !ctx->budget->TryReserve(static_cast<int64_t>(bytes))) {
      return fail(StrCat("kernel workspace of ", bytes, " bytes would pass the worker's memory budget (",
                         ctx->budget->used(), " of ", ctx->budget->limit(), " bytes in use)"));
    }
    Result<void*> p =
        ctx->device == Device::kCuda ? CudaAllocateAsync(bytes, ctx->stream) : HostAllocator().Allocate(bytes);
    if (!p.ok()) {
      if (ctx->budget != nullptr) ctx->budget->Release(static_cast<int64_t>(bytes));
      return fail("kernel workspace: " + p.status().message());
    }
    std::lock_guard<std::mutex> lock(ctx->workspace_mu);
    ctx->workspace.emplace_back(*p, bytes);
    return *p;
  } catch (...) {
    return fail("kernel workspace: allocation failed");
  }
}

void HostWorkspaceFree(void* host_ctx, void* ptr) noexcept {
  auto* ctx = static_cast<CallContext*>(host_ctx);
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(ctx->workspace_mu);
  for (auto it = ctx->workspace.begin(); it != ctx->workspace.end(); ++it) {
    if (it->first == ptr) {
      ctx->FreeBlock(it->first, it->second);
      ctx->workspace.erase(it);
      return;
    }
  }
}

tessel_tensor ViewOf(const Tensor& t) {
  tessel_tensor view{};
  view.struct_size = sizeof(tessel_tensor);
  view.dtype = static_cast<int32_t>(t.dtype());
  view.device = static_cast<int32_t>(t.device());
  view.ndim = t.ndim();
  for (int i = 0; i < t.ndim(); ++i) view.shape[i] = t.dim(i);
  view.data = t.raw();
  return view;
}

}  // namespace

Kernel::Kernel(std::string op, Device device, std::string schema_text, Schema schema,
               std::vector<OutputRows> output_rows, tessel_kernel_fn fn, void* state, std::string plugin_path,
               size_t params_size, uint32_t floating_dtypes)
    : op_(std::move(op)),
      device_(device),
      schema_text_(std::move(schema_text)),
      schema_(std::move(schema)),
      output_rows_(std::move(output_rows)),
      fn_(fn),
      state_(state),
      plugin_path_(std::move(plugin_path)),
      params_size_(params_size),
      floating_dtypes_(floating_dtypes == 0 ? TESSEL_DTYPE_BIT(TESSEL_DTYPE_F32) | TESSEL_DTYPE_BIT(TESSEL_DTYPE_F64)
                                            : floating_dtypes),
      context_(StrCat("plugin ", plugin_path_, " op ", op_)) {}

Status Kernel::Call(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                    const CallOptions& options, const void* params, size_t params_size) const {
  const activity::KernelScope scope(op_, DeviceName(device_));  // for a hang's report
  if (options.timer != nullptr && options.timer->active()) {
    return options.timer->Time(op_, device_, device_ == Device::kCuda ? options.cuda_stream : nullptr,
                               [&] { return Run(inputs, outputs, options, params, params_size); });
  }
  return Run(inputs, outputs, options, params, params_size);
}

Status Kernel::Run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   const CallOptions& options, const void* params, size_t params_size) const {
  if (params_size != params_size_ || (params_size_ > 0 && params == nullptr)) {
    return InternalError(StrCat(context_, ": called with a parameter struct of ", params == nullptr ? 0 : params_size,
                                " bytes, the op declares ", params_size_));
  }
  auto floating = CheckCall(schema_, device_, inputs, outputs, output_rows_);
  if (!floating.ok()) return floating.status().WithContext(context_);
  // The schema bounds ranks already; this guards the fixed-size shape array of the view regardless.
  auto too_many_dims = [](const Tensor* t) { return t->ndim() > TESSEL_MAX_DIMS; };
  if (std::any_of(inputs.begin(), inputs.end(), too_many_dims) ||
      std::any_of(outputs.begin(), outputs.end(), too_many_dims)) {
    return InternalError(StrCat(context_, ": a tensor has more than ", TESSEL_MAX_DIMS, " dims"));
  }
  std::vector<tessel_tensor> in_views, out_views;
  in_views.reserve(inputs.size());
  out_views.reserve(outputs.size());
  for (const Tensor* t : inputs) in_views.push_back(ViewOf(*t));
  for (const Tensor* t : outputs) out_views.push_back(ViewOf(*t));

  // The call's T: the kernel must have registered for it.
  if (*floating && (floating_dtypes_ & TESSEL_DTYPE_BIT(static_cast<int>(**floating))) == 0) {
    return InternalError(StrCat(context_, ": the kernel does not take dtype ", DTypeName(**floating)));
  }
  CallContext ctx;
  ctx.pool = options.pool;
  ctx.device = device_;
  ctx.stream = options.cuda_stream;
  ctx.budget = options.budget;
  ctx.pool_of_workspace = device_ == Device::kCpu ? options.workspace_pool : nullptr;
  tessel_kernel_call call{};
  call.struct_size = sizeof(tessel_kernel_call);
  call.num_inputs = static_cast<int32_t>(in_views.size());
  call.inputs = in_views.data();
  call.num_outputs = static_cast<int32_t>(out_views.size());
  call.outputs = out_views.data();
  call.cuda_stream = device_ == Device::kCuda ? options.cuda_stream : nullptr;
  call.host_ctx = &ctx;
  call.parallel_for = &HostParallelFor;
  call.make_status = &HostCallMakeStatus;
  call.device_ordinal = device_ == Device::kCuda ? options.device_ordinal : 0;
  call.params = params;
  call.params_size = params == nullptr ? 0 : params_size;
  call.workspace_alloc = &HostWorkspaceAlloc;
  call.workspace_free = &HostWorkspaceFree;

  tessel_status* returned = nullptr;
  try {
    returned = fn_(state_, &call);
  } catch (const std::exception& e) {
    return InternalError(StrCat(context_, ": exception thrown across the ABI boundary (a plugin bug): ", e.what()));
  } catch (...) {
    return InternalError(StrCat(context_, ": unknown exception thrown across the ABI boundary (a plugin bug)"));
  }
  Status status = TakeStatus(returned, context_);
  if (!ctx.callback_error.empty()) return InternalError(StrCat(context_, ": ", ctx.callback_error));
  return status;
}

}  // namespace tessel::workers

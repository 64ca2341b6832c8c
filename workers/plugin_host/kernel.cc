#include "workers/plugin_host/kernel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <utility>

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
               std::vector<OutputRows> output_rows, tessel_kernel_fn fn, void* state, std::string plugin_path)
    : op_(std::move(op)),
      device_(device),
      schema_text_(std::move(schema_text)),
      schema_(std::move(schema)),
      output_rows_(std::move(output_rows)),
      fn_(fn),
      state_(state),
      plugin_path_(std::move(plugin_path)),
      context_(StrCat("plugin ", plugin_path_, " op ", op_)) {}

Status Kernel::Call(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                    ThreadPool* pool) const {
  return Call(inputs, outputs, pool, nullptr);
}

Status Kernel::Call(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs, ThreadPool* pool,
                    void* cuda_stream) const {
  TESSEL_RETURN_IF_ERROR(CheckCall(schema_, device_, inputs, outputs, output_rows_).WithContext(context_));
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

  CallContext ctx;
  ctx.pool = pool;
  tessel_kernel_call call{};
  call.struct_size = sizeof(tessel_kernel_call);
  call.num_inputs = static_cast<int32_t>(in_views.size());
  call.inputs = in_views.data();
  call.num_outputs = static_cast<int32_t>(out_views.size());
  call.outputs = out_views.data();
  call.cuda_stream = device_ == Device::kCuda ? cuda_stream : nullptr;
  call.host_ctx = &ctx;
  call.parallel_for = &HostParallelFor;
  call.make_status = &HostCallMakeStatus;

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

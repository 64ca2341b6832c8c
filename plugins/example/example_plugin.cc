// A minimal Tessel plugin: the template for new kernels. Copy this directory, rename the op and the
// target, and keep the three rules of the boundary (include/tessel/plugin.h):
//   1. export only tessel_plugin_init (tessel_add_plugin() arranges it);
//   2. never let a C++ exception escape a function the host calls: catch and return a status;
//   3. report errors as statuses made by the host (call->make_status / host->make_status).
//
// It provides one op:
//   example.scale.fwd(X:T[N], alpha:f64[1]) -> (Y:T[N])      Y = alpha * X, T = f32 or f64
#include <tessel/plugin.h>

#include <exception>
#include <string>

namespace {

// The signature the host checks every call against (dtype, rank, sizes): symbol N must agree across
// X and Y, and alpha must hold exactly one f64.
constexpr const char* kOp = "example.scale.fwd";
constexpr const char* kSchema = "example.scale.fwd(X:T[N], alpha:f64[1]) -> (Y:T[N])";

// The kernel body, written once for both dtypes. parallel_for hands out chunks [begin, end) of the
// host's thread pool; the context travels through a void*.
template <typename T>
struct ScaleChunk {
  const T* x;
  T* y;
  T alpha;

  static void Run(void* ctx, int64_t begin, int64_t end) noexcept {
    auto* self = static_cast<ScaleChunk*>(ctx);
    for (int64_t i = begin; i < end; ++i) self->y[i] = self->alpha * self->x[i];
  }
};

template <typename T>
void Scale(const tessel_kernel_call* call) {
  const tessel_tensor& x = call->inputs[0];
  const tessel_tensor& alpha = call->inputs[1];
  tessel_tensor& y = call->outputs[0];
  ScaleChunk<T> chunk{static_cast<const T*>(x.data), static_cast<T*>(y.data),
                      static_cast<T>(*static_cast<const double*>(alpha.data))};
  call->parallel_for(call->host_ctx, x.shape[0], /*grain=*/1 << 14, &ScaleChunk<T>::Run, &chunk);
}

// What the host calls. The host has already checked the tensors against kSchema; a kernel still
// checks what it relies on when that is cheap, and returns a status rather than crashing.
tessel_status* ScaleCpu(void* /*kernel_state*/, const tessel_kernel_call* call) {
  try {
    if (call->num_inputs != 2 || call->num_outputs != 1) {
      return call->make_status(call->host_ctx, TESSEL_STATUS_INVALID_ARGUMENT, "expected 2 inputs and 1 output");
    }
    switch (call->inputs[0].dtype) {
      case TESSEL_DTYPE_F32:
        Scale<float>(call);
        break;
      case TESSEL_DTYPE_F64:
        Scale<double>(call);
        break;
      default:
        return call->make_status(call->host_ctx, TESSEL_STATUS_INVALID_ARGUMENT, "X must be f32 or f64");
    }
    return nullptr;  // success
  } catch (const std::exception& e) {
    return call->make_status(call->host_ctx, TESSEL_STATUS_INTERNAL, e.what());
  } catch (...) {
    return call->make_status(call->host_ctx, TESSEL_STATUS_INTERNAL, "unknown exception");
  }
}

}  // namespace

// The one exported symbol. Fill in `info` (the host checks the ABI version you were built against),
// then register each kernel. Strings are copied by the host; static storage is fine for info.
extern "C" TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host,
                                                                  tessel_plugin_info* info) {
  info->abi_major = TESSEL_PLUGIN_ABI_MAJOR;
  info->abi_minor = TESSEL_PLUGIN_ABI_MINOR;
  info->name = "example";
  info->version = "1.0.0";
  info->description = "Template plugin: example.scale.fwd (Y = alpha * X) on CPU";

  tessel_kernel_def def{};
  def.struct_size = sizeof(def);  // lets a newer host know which fields this plugin filled
  def.op = kOp;
  def.device = TESSEL_DEVICE_CPU;
  def.schema = kSchema;
  def.fn = &ScaleCpu;
  def.kernel_state = nullptr;                          // per-kernel state (a handle, a cache) would go here
  return host->register_kernel(host->registry, &def);  // null on success, else the host's error
}

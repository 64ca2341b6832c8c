// A Tessel plugin: the template for new kernels. Copy this directory, rename the plugin, the ops and the
// target, and keep the three rules of the boundary (include/tessel/plugin.h):
//   1. export only tessel_plugin_init (tessel_add_plugin() arranges it);
//   2. never let a C++ exception escape a function the host calls: catch and return a status;
//   3. report errors as statuses made by the host (call->make_status / host->make_status).
//
// It provides
//   - an op Tessel knows, nn.relu.fwd and nn.relu.bwd (<tessel/ops/nn.h>), on CPU and, when built with
//     CUDA, on CUDA (example_relu.cu). A job uses them instead of the built-in nn plugin's with
//       [plugins] search_dirs = ["<the built-in plugins>", "<this plugin's directory>"]
//                 prefer = ["example"]
//     and `tessel plugin check libtessel_example.so` runs them against the built-in ones;
//   - an op of its own, example.scale.fwd(X:T[N], alpha:f64[1]) -> (Y:T[N]): Y = alpha * X.
// T is f32 or f64 for every kernel here.
#include <tessel/ops/nn.h>
#include <tessel/plugin.h>

#include <exception>

#include "example_kernels.h"

namespace {

// The signature of the op of our own. The host checks every call against it (dtype, rank, sizes):
// symbol N must agree across X and Y, and alpha must hold exactly one f64. An op Tessel knows takes its
// name and schema from the declaration in <tessel/ops/...>, so they are never written twice.
constexpr const char* kScaleOp = "example.scale.fwd";
constexpr const char* kScaleSchema = "example.scale.fwd(X:T[N], alpha:f64[1]) -> (Y:T[N])";

// The CPU kernel bodies, written once for both dtypes. parallel_for hands out chunks [begin, end) of
// the host's thread pool; the context travels through a void*.
template <typename T>
struct Elementwise {
  const T* a;  // X (scale, relu.fwd) or dY (relu.bwd)
  const T* b;  // relu.bwd: Y
  T* out;
  T alpha;

  static void Scale(void* ctx, int64_t begin, int64_t end) noexcept {
    auto* s = static_cast<Elementwise*>(ctx);
    for (int64_t i = begin; i < end; ++i) s->out[i] = s->alpha * s->a[i];
  }
  static void ReluFwd(void* ctx, int64_t begin, int64_t end) noexcept {
    auto* s = static_cast<Elementwise*>(ctx);
    for (int64_t i = begin; i < end; ++i) s->out[i] = s->a[i] > T(0) ? s->a[i] : T(0);
  }
  static void ReluBwd(void* ctx, int64_t begin, int64_t end) noexcept {
    auto* s = static_cast<Elementwise*>(ctx);
    for (int64_t i = begin; i < end; ++i) {
      const T g = s->a[i];  // read whatever the sign: a vector blend, not a branch on random signs
      s->out[i] = s->b[i] > T(0) ? g : T(0);
    }
  }
};

int64_t Numel(const tessel_tensor& t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t.ndim; ++d) n *= t.shape[d];
  return n;
}

enum class Op { kScale, kReluFwd, kReluBwd };

template <typename T>
void RunCpu(Op op, const tessel_kernel_call* call) {
  Elementwise<T> e{static_cast<const T*>(call->inputs[0].data), nullptr, static_cast<T*>(call->outputs[0].data), T(0)};
  tessel_range_fn fn = &Elementwise<T>::ReluFwd;
  if (op == Op::kScale) {
    e.alpha = static_cast<T>(*static_cast<const double*>(call->inputs[1].data));
    fn = &Elementwise<T>::Scale;
  } else if (op == Op::kReluBwd) {
    e.b = static_cast<const T*>(call->inputs[1].data);
    fn = &Elementwise<T>::ReluBwd;
  }
  call->parallel_for(call->host_ctx, Numel(call->outputs[0]), /*grain=*/1 << 14, fn, &e);
}

// What the host calls. The host has already checked the tensors against the schema; a kernel still
// checks what it relies on when that is cheap, and returns a status rather than crashing. The op
// travels in kernel_state, so one function serves the three ops.
tessel_status* CpuKernel(void* kernel_state, const tessel_kernel_call* call) {
  try {
    const Op op = *static_cast<const Op*>(kernel_state);
    switch (call->outputs[0].dtype) {
      case TESSEL_DTYPE_F32:
        RunCpu<float>(op, call);
        break;
      case TESSEL_DTYPE_F64:
        RunCpu<double>(op, call);
        break;
      default:
        return call->make_status(call->host_ctx, TESSEL_STATUS_INVALID_ARGUMENT, "T must be f32 or f64");
    }
    return nullptr;  // success
  } catch (const std::exception& e) {
    return call->make_status(call->host_ctx, TESSEL_STATUS_INTERNAL, e.what());
  } catch (...) {
    return call->make_status(call->host_ctx, TESSEL_STATUS_INTERNAL, "unknown exception");
  }
}

#ifdef TESSEL_EXAMPLE_CUDA
tessel_status* CudaKernel(void* kernel_state, const tessel_kernel_call* call) {
  const Op op = *static_cast<const Op*>(kernel_state);
  const tessel_tensor& y = call->outputs[0];
  const bool f64 = y.dtype == TESSEL_DTYPE_F64;
  const char* error =
      op == Op::kReluFwd
          ? example_relu_fwd_cuda(call->inputs[0].data, y.data, Numel(y), f64, call->cuda_stream)
          : example_relu_bwd_cuda(call->inputs[0].data, call->inputs[1].data, y.data, Numel(y), f64, call->cuda_stream);
  return error == nullptr ? nullptr : call->make_status(call->host_ctx, TESSEL_STATUS_INTERNAL, error);
}
#endif

constexpr Op kScale = Op::kScale, kReluFwd = Op::kReluFwd, kReluBwd = Op::kReluBwd;

tessel_status* Register(const tessel_host_api* host, const char* op, const char* schema, int32_t device,
                        tessel_kernel_fn fn, const Op* which) {
  tessel_kernel_def def{};
  def.struct_size = sizeof(def);  // lets a newer host know which fields this plugin filled
  def.op = op;
  def.device = device;
  def.schema = schema;
  def.fn = fn;
  def.kernel_state = const_cast<Op*>(which);  // per-kernel state (a handle, a cache); ours says which op
  def.params_size = 0;                        // these ops have no parameter struct
  def.floating_dtypes = TESSEL_DTYPE_BIT(TESSEL_DTYPE_F32) | TESSEL_DTYPE_BIT(TESSEL_DTYPE_F64);
  return host->register_kernel(host->registry, &def);  // null on success, else the host's error
}

}  // namespace

// The one exported symbol. Fill in `info` (the host checks the ABI version you were built against),
// then register each kernel. Strings are copied by the host; static storage is fine for info.
extern "C" TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host,
                                                                  tessel_plugin_info* info) {
  info->abi_major = TESSEL_PLUGIN_ABI_MAJOR;
  info->abi_minor = TESSEL_PLUGIN_ABI_MINOR;
  info->name = "example";
  info->version = "1.1.0";
  info->description = "Template plugin: nn.relu.fwd/bwd (CPU, and CUDA when built with it) and example.scale.fwd";

  tessel_status* st = Register(host, kScaleOp, kScaleSchema, TESSEL_DEVICE_CPU, &CpuKernel, &kScale);
  if (st == nullptr) {
    st = Register(host, tessel_op_nn_relu_fwd.name, tessel_op_nn_relu_fwd.schema, TESSEL_DEVICE_CPU, &CpuKernel,
                  &kReluFwd);
  }
  if (st == nullptr) {
    st = Register(host, tessel_op_nn_relu_bwd.name, tessel_op_nn_relu_bwd.schema, TESSEL_DEVICE_CPU, &CpuKernel,
                  &kReluBwd);
  }
#ifdef TESSEL_EXAMPLE_CUDA
  if (st == nullptr) {
    st = Register(host, tessel_op_nn_relu_fwd.name, tessel_op_nn_relu_fwd.schema, TESSEL_DEVICE_CUDA, &CudaKernel,
                  &kReluFwd);
  }
  if (st == nullptr) {
    st = Register(host, tessel_op_nn_relu_bwd.name, tessel_op_nn_relu_bwd.schema, TESSEL_DEVICE_CUDA, &CudaKernel,
                  &kReluBwd);
  }
#endif
  return st;
}

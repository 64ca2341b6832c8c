// Deliberately broken plugins for the loader tests. One source, one variant per build, chosen by
// TEST_PLUGIN_VARIANT (see CMakeLists.txt). Each variant is otherwise a well-formed plugin, so the
// loader's refusal can only come from the defect under test.
#include <tessel/plugin.h>

#include <csignal>
#include <stdexcept>

#define VARIANT_WRONG_ABI_MAJOR 1
#define VARIANT_NEWER_ABI_MINOR 2
#define VARIANT_MISSING_OPS 3
#define VARIANT_WRONG_SCHEMA 4
#define VARIANT_BAD_SYNTAX 5
#define VARIANT_DUPLICATE_OP 6
#define VARIANT_THROWING 7
#define VARIANT_INIT_FAILS 8
#define VARIANT_INIT_THROWS 9
#define VARIANT_WRONG_PARAMS 10
#define VARIANT_INIT_CRASHES 11
#define VARIANT_FAILS_AT_RUN 12

namespace {

// nn.relu.fwd on f64 only, enough to be a real kernel.
tessel_status* Relu(void*, const tessel_kernel_call* call) {
  const tessel_tensor& x = call->inputs[0];
  const int64_t n = x.shape[0] * x.shape[1];
  if (x.dtype != TESSEL_DTYPE_F64) return call->make_status(call->host_ctx, TESSEL_STATUS_INVALID_ARGUMENT, "f64 only");
  const double* in = static_cast<const double*>(x.data);
  double* out = static_cast<double*>(call->outputs[0].data);
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0 ? in[i] : 0;
  return nullptr;
}

#if TEST_PLUGIN_VARIANT == VARIANT_THROWING
tessel_status* Throws(void*, const tessel_kernel_call*) { throw std::runtime_error("boom from the kernel"); }

void ThrowInRange(void*, int64_t, int64_t) { throw std::runtime_error("boom from a range"); }
tessel_status* ThrowsInParallelFor(void*, const tessel_kernel_call* call) {
  call->parallel_for(call->host_ctx, 1000, 10, &ThrowInRange, nullptr);
  return nullptr;
}

// Y = 2 X through a workspace copy of X (ABI 1.1): exercises the host's workspace allocator.
tessel_status* ThroughWorkspace(void*, const tessel_kernel_call* call) {
  const int64_t n = call->inputs[0].shape[0];
  tessel_status* status = nullptr;
  auto* ws = static_cast<double*>(call->workspace_alloc(call->host_ctx, n * sizeof(double), &status));
  if (ws == nullptr) return status;
  const double* x = static_cast<const double*>(call->inputs[0].data);
  double* y = static_cast<double*>(call->outputs[0].data);
  for (int64_t i = 0; i < n; ++i) ws[i] = x[i];
  for (int64_t i = 0; i < n; ++i) y[i] = 2 * ws[i];
  call->workspace_free(call->host_ctx, ws);
  return nullptr;
}
#endif

#if TEST_PLUGIN_VARIANT == VARIANT_FAILS_AT_RUN
// nn.relu.fwd on f32 that works twice, then fails with TESSEL_STATUS_PLUGIN: a kernel that meets a
// problem only at run time (a device gone, a licence expired), which must stop the job cleanly.
tessel_status* ReluThenFail(void*, const tessel_kernel_call* call) {
  static int calls = 0;
  if (++calls > 2) {
    return call->make_status(call->host_ctx, TESSEL_STATUS_PLUGIN, "the accelerator went away (an injected failure)");
  }
  const tessel_tensor& x = call->inputs[0];
  const int64_t n = x.shape[0] * x.shape[1];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0 ? in[i] : 0;
  return nullptr;
}
#endif

tessel_status* Register(const tessel_host_api* host, const char* op, const char* schema, tessel_kernel_fn fn,
                        size_t params_size = 0) {
  tessel_kernel_def def{};
  def.struct_size = sizeof(def);
  def.op = op;
  def.device = TESSEL_DEVICE_CPU;
  def.schema = schema;
  def.fn = fn;
  def.params_size = params_size;
  return host->register_kernel(host->registry, &def);
}

}  // namespace

extern "C" TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host,
                                                                  tessel_plugin_info* info) {
  info->abi_major = TESSEL_PLUGIN_ABI_MAJOR;
  info->abi_minor = TESSEL_PLUGIN_ABI_MINOR;
  info->name = "test_" TEST_PLUGIN_NAME;
  info->version = "0.0.1";
  info->description = "a deliberately broken plugin for the loader tests";
  const char* relu_schema = "nn.relu.fwd(X:T[N,D]) -> (Y:T[N,D])";
#if TEST_PLUGIN_VARIANT == VARIANT_WRONG_ABI_MAJOR
  info->abi_major = TESSEL_PLUGIN_ABI_MAJOR + 1;
#elif TEST_PLUGIN_VARIANT == VARIANT_NEWER_ABI_MINOR
  info->abi_minor = TESSEL_PLUGIN_ABI_MINOR + 1;
#elif TEST_PLUGIN_VARIANT == VARIANT_WRONG_SCHEMA
  relu_schema = "nn.relu.fwd(X:T[N,D]) -> (Y:T[N,C])";
#elif TEST_PLUGIN_VARIANT == VARIANT_BAD_SYNTAX
  relu_schema = "nn.relu.fwd(X:T[N,D] -> Y";
#elif TEST_PLUGIN_VARIANT == VARIANT_THROWING
  if (tessel_status* st = Register(host, "test.throw.fwd", "test.throw.fwd(X:f64[N]) -> (Y:f64[N])", &Throws))
    return st;
  if (tessel_status* st = Register(host, "test.throw_in_range.fwd", "test.throw_in_range.fwd(X:f64[N]) -> (Y:f64[N])",
                                   &ThrowsInParallelFor)) {
    return st;
  }
  if (tessel_status* st =
          Register(host, "test.workspace.fwd", "test.workspace.fwd(X:f64[N]) -> (Y:f64[N])", &ThroughWorkspace)) {
    return st;
  }
#elif TEST_PLUGIN_VARIANT == VARIANT_INIT_FAILS
  return host->make_status(host->registry, TESSEL_STATUS_PLUGIN, "no licence for this machine");
#elif TEST_PLUGIN_VARIANT == VARIANT_INIT_THROWS
  throw std::runtime_error("init exploded");
#elif TEST_PLUGIN_VARIANT == VARIANT_INIT_CRASHES
  std::raise(SIGSEGV);  // what a plugin with a bad pointer in its initialiser does to its host
#elif TEST_PLUGIN_VARIANT == VARIANT_FAILS_AT_RUN
  return Register(host, "nn.relu.fwd", relu_schema, &ReluThenFail);
#elif TEST_PLUGIN_VARIANT == VARIANT_WRONG_PARAMS
  // The host's schema, but a parameter struct of the wrong size.
  return Register(host, "optim.adam.step", "optim.adam.step(param:T[P], grad:T[P], m:T[P], v:T[P]) -> ()", &Relu, 8);
#endif
  // MISSING_OPS and DUPLICATE_OP register just this one valid kernel: the former lacks every other
  // RGCN op, the latter collides with libtessel_rgnn.so's nn.relu.fwd.
  return Register(host, "nn.relu.fwd", relu_schema, &Relu);
}

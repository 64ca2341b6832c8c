// A plugin built against the ABI 1.0 header (abi_1_0/tessel/plugin.h, a verbatim copy kept as a
// fixture): its tessel_kernel_def and tessel_kernel_call end before the 1.1 fields. The 1.1 host must
// load it, and call its kernel with nothing it did not declare.
#include <tessel/plugin.h>

#if TESSEL_PLUGIN_ABI_MINOR != 0
#error "this fixture must build against the 1.0 header in abi_1_0/"
#endif

namespace {

struct Chunk {
  const double* x;
  double* y;
  static void Run(void* ctx, int64_t begin, int64_t end) {
    auto* c = static_cast<Chunk*>(ctx);
    for (int64_t i = begin; i < end; ++i) c->y[i] = 2 * c->x[i];
  }
};

tessel_status* Double(void*, const tessel_kernel_call* call) {
  if (call->struct_size < sizeof(tessel_kernel_call) || call->num_inputs != 1 || call->num_outputs != 1) {
    return call->make_status(call->host_ctx, TESSEL_STATUS_INVALID_ARGUMENT, "unexpected call");
  }
  Chunk chunk{static_cast<const double*>(call->inputs[0].data), static_cast<double*>(call->outputs[0].data)};
  call->parallel_for(call->host_ctx, call->inputs[0].shape[0], 1, &Chunk::Run, &chunk);
  return nullptr;
}

}  // namespace

extern "C" TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host,
                                                                  tessel_plugin_info* info) {
  info->abi_major = TESSEL_PLUGIN_ABI_MAJOR;
  info->abi_minor = TESSEL_PLUGIN_ABI_MINOR;
  info->name = "test_abi_1_0";
  info->version = "1.0.0";
  info->description = "a plugin built against the ABI 1.0 header";
  tessel_kernel_def def{};
  def.struct_size = sizeof(def);
  def.op = "test.v10.double.fwd";
  def.device = TESSEL_DEVICE_CPU;
  def.schema = "test.v10.double.fwd(X:f64[N]) -> (Y:f64[N])";
  def.fn = &Double;
  return host->register_kernel(host->registry, &def);
}

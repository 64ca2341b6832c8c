#include "kernel_support.h"

#include <cstddef>
#include <cstring>

namespace tessel::kernels {
namespace {

// Arguments on one side of "->" in a schema: the number of ':' there.
int32_t CountArgs(const char* schema, bool outputs) {
  const char* arrow = std::strstr(schema, "->");
  const char* begin = outputs ? arrow : schema;
  const char* end = outputs || arrow == nullptr ? schema + std::strlen(schema) : arrow;
  if (begin == nullptr) return 0;
  int32_t n = 0;
  for (const char* c = begin; c < end; ++c) n += *c == ':' ? 1 : 0;
  return n;
}

std::string ShapeString(const tessel_tensor& t) {
  std::string out = "[";
  for (int32_t i = 0; i < t.ndim && i < TESSEL_MAX_DIMS; ++i) out += (i ? ", " : "") + std::to_string(t.shape[i]);
  return out + "]";
}

}  // namespace

ArgPosition FirstFloatingArg(const char* schema) {
  const char* arrow = std::strstr(schema, "->");
  ArgPosition at;
  int32_t index = 0;
  for (const char* c = schema; *c != '\0'; ++c) {
    if (c == arrow) at.output = true, index = 0;
    if (*c != ':') continue;
    if (c[1] == 'T' && c[2] == '[') {
      at.index = index;
      return at;
    }
    ++index;
  }
  return ArgPosition{};
}

const char* DTypeLabel(int32_t dtype) {
  switch (dtype) {
    case TESSEL_DTYPE_F32:
      return "f32";
    case TESSEL_DTYPE_F64:
      return "f64";
    case TESSEL_DTYPE_I32:
      return "i32";
    case TESSEL_DTYPE_I64:
      return "i64";
    case TESSEL_DTYPE_U8:
      return "u8";
    case TESSEL_DTYPE_BF16:
      return "bf16";
    case TESSEL_DTYPE_F16:
      return "f16";
    default:
      return "unknown dtype";
  }
}

KernelArgs::KernelArgs(const tessel_kernel_call* call, int32_t device, const tessel_op_decl& op, void* state)
    : call_(call), device_(device), op_(op), state_(state) {
  if (call->struct_size < sizeof(tessel_kernel_call)) {
    Fail(TESSEL_STATUS_PLUGIN, "the host's tessel_kernel_call is older than this plugin's ABI");
  }
  const int32_t num_inputs = CountArgs(op.schema, false), num_outputs = CountArgs(op.schema, true);
  if (call->num_inputs != num_inputs || call->num_outputs != num_outputs) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         "expected " + std::to_string(num_inputs) + " inputs and " + std::to_string(num_outputs) + " outputs, got " +
             std::to_string(call->num_inputs) + " and " + std::to_string(call->num_outputs));
  }
}

void KernelArgs::CheckParams(size_t size) const {
  if (call_->params == nullptr || call_->params_size != size) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, std::string(op_.name) + " needs its parameter struct of " +
                                             std::to_string(size) + " bytes, got " +
                                             std::to_string(call_->params == nullptr ? 0 : call_->params_size));
  }
  if (*static_cast<const size_t*>(call_->params) != size) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, std::string(op_.name) + ": the parameter struct's struct_size is " +
                                             std::to_string(*static_cast<const size_t*>(call_->params)) +
                                             ", expected " + std::to_string(size));
  }
}

void* KernelArgs::AllocateWorkspace(size_t bytes) const {
  if (call_->workspace_alloc == nullptr) Fail(TESSEL_STATUS_INTERNAL, "the host offers no workspace allocator");
  tessel_status* status = nullptr;
  void* p = call_->workspace_alloc(call_->host_ctx, bytes, &status);
  if (p == nullptr) {
    if (status != nullptr) throw HostStatusError{status};
    Fail(TESSEL_STATUS_INTERNAL, "workspace allocation of " + std::to_string(bytes) + " bytes failed");
  }
  return p;
}

void KernelArgs::FreeWorkspace(void* ptr) const {
  if (call_->workspace_free != nullptr) call_->workspace_free(call_->host_ctx, ptr);
}

tessel_status* RegisterKernels(const tessel_host_api* host, const KernelRegistration* table, size_t count,
                               int32_t device, void* state) {
  for (size_t i = 0; i < count; ++i) {
    tessel_kernel_def def{};
    def.struct_size = sizeof(def);
    def.op = table[i].op->name;
    def.device = device;
    def.schema = table[i].op->schema;
    def.fn = table[i].fn;
    def.kernel_state = state;
    def.params_size = table[i].op->params_size;
    def.floating_dtypes = table[i].floating_dtypes;
    if (tessel_status* status = host->register_kernel(host->registry, &def)) return status;
  }
  return nullptr;
}

void* KernelArgs::Check(const tessel_tensor& t, int32_t dtype, const char* role, const char* name,
                        std::initializer_list<int64_t*> dims) const {
  const std::string who = std::string(role) + " '" + name + "'";
  if (t.struct_size < offsetof(tessel_tensor, data) + sizeof(t.data))
    Fail(TESSEL_STATUS_PLUGIN, who + ": tensor view too small");
  if (t.device != device_) Fail(TESSEL_STATUS_INVALID_ARGUMENT, who + " is on the wrong device");
  if (t.dtype != dtype) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, who + " has dtype " + DTypeLabel(t.dtype) + ", expected " + DTypeLabel(dtype));
  }
  if (t.ndim != static_cast<int32_t>(dims.size())) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         who + " has rank " + std::to_string(t.ndim) + ", expected " + std::to_string(dims.size()));
  }
  int64_t numel = 1;
  int j = 0;
  for (int64_t* dim : dims) {
    const int64_t size = t.shape[j];
    if (size < 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, who + " has a negative size");
    if (*dim == kUnbound) {
      *dim = size;
    } else if (*dim != size) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT,
           who + " has shape " + ShapeString(t) + ": dim " + std::to_string(j) + " should be " + std::to_string(*dim));
    }
    numel *= size;
    ++j;
  }
  if (numel > 0 && t.data == nullptr) Fail(TESSEL_STATUS_INVALID_ARGUMENT, who + " has no data");
  return t.data;
}

}  // namespace tessel::kernels

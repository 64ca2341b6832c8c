#include "kernel_support.h"

#include <cstddef>

namespace tessel::rgnn {
namespace {

std::string ShapeString(const tessel_tensor& t) {
  std::string out = "[";
  for (int32_t i = 0; i < t.ndim && i < TESSEL_MAX_DIMS; ++i) out += (i ? ", " : "") + std::to_string(t.shape[i]);
  return out + "]";
}

}  // namespace

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
    default:
      return "unknown dtype";
  }
}

KernelArgs::KernelArgs(const tessel_kernel_call* call, int32_t device, int32_t num_inputs, int32_t num_outputs)
    : call_(call), device_(device) {
  if (call->struct_size < sizeof(tessel_kernel_call)) {
    Fail(TESSEL_STATUS_PLUGIN, "the host's tessel_kernel_call is older than this plugin's ABI");
  }
  if (call->num_inputs != num_inputs || call->num_outputs != num_outputs) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         "expected " + std::to_string(num_inputs) + " inputs and " + std::to_string(num_outputs) + " outputs, got " +
             std::to_string(call->num_inputs) + " and " + std::to_string(call->num_outputs));
  }
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

}  // namespace tessel::rgnn

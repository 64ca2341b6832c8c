#include "core/tensor.h"

#include <cstring>
#include <limits>
#include <sstream>

#include "core/logging.h"

namespace tessel {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kU8:
      return 1;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kU8:
      return "u8";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
  }
  return "?";
}

struct Tensor::Buffer {
  Buffer(Allocator* a, void* p) : alloc(a), ptr(p) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { alloc->Free(ptr); }
  Allocator* alloc;
  void* ptr;
};

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

Result<Tensor> Tensor::Empty(DType dtype, std::vector<int64_t> shape, Allocator& alloc) {
  Tensor t;
  t.dtype_ = dtype;
  t.device_ = alloc.device();
  t.shape_ = std::move(shape);
  int64_t elements = 1;
  for (int64_t d : t.shape_) {
    if (d < 0) return InternalError("negative tensor dimension in " + t.DebugString());
    if (d > 0 && elements > std::numeric_limits<int64_t>::max() / 8 / d) {
      return StorageError(StrCat("out of memory: a ", t.DebugString(), " tensor would take more than 2^63 bytes"));
    }
    elements *= d;
  }
  Result<void*> allocated = alloc.Allocate(t.nbytes());
  if (!allocated.ok()) {
    // Said with the shape, so that the caller's context (which tensor, which setting) completes it.
    return Status(allocated.status().code(), StrCat("a ", t.DebugString(), " tensor: ", allocated.status().message()));
  }
  void* p = *allocated;
  t.buffer_ = std::make_shared<Buffer>(&alloc, p);
  t.data_ = p;
  return t;
}

Result<Tensor> Tensor::Zeros(DType dtype, std::vector<int64_t> shape, Allocator& alloc) {
  if (alloc.device() != Device::kCpu) return InternalError("Tensor::Zeros supports host memory only");
  TESSEL_ASSIGN_OR_RETURN(Tensor t, Empty(dtype, std::move(shape), alloc));
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::Borrow(void* data, DType dtype, std::vector<int64_t> shape, Device device) {
  Tensor t;
  t.data_ = data;
  t.dtype_ = dtype;
  t.device_ = device;
  t.shape_ = std::move(shape);
  return t;
}

std::string Tensor::DebugString() const {
  std::ostringstream os;
  os << DTypeName(dtype_) << "[";
  for (size_t i = 0; i < shape_.size(); ++i) os << (i ? ", " : "") << shape_[i];
  os << "] " << DeviceName(device_);
  return os.str();
}

}  // namespace tessel

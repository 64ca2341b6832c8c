// Tensor: dtype, shape, device and a reference-counted owning buffer.
// Ownership: copies of a Tensor share the buffer; the buffer is freed with the last copy, through the
// allocator that made it. Thread safety: like std::shared_ptr; concurrent writes to the data need
// outside synchronisation. Failure: Empty/Zeros return a Status when allocation fails.
#pragma once

#include <tessel/bf16.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/status.h"

namespace tessel {

// The values are the plugin ABI's tessel_dtype codes. kBF16 and kF16 are storage types (ABI 1.1).
enum class DType : int { kF32 = 0, kF64 = 1, kI32 = 2, kI64 = 3, kU8 = 4, kBF16 = 5, kF16 = 6 };
size_t DTypeSize(DType dtype);
std::string_view DTypeName(DType dtype);

template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() {
  return DType::kF32;
}
template <>
constexpr DType DTypeOf<double>() {
  return DType::kF64;
}
template <>
constexpr DType DTypeOf<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType DTypeOf<int64_t>() {
  return DType::kI64;
}
template <>
constexpr DType DTypeOf<uint8_t>() {
  return DType::kU8;
}
template <>
constexpr DType DTypeOf<Bf16>() {
  return DType::kBF16;
}

class Tensor {
 public:
  Tensor() = default;

  static Result<Tensor> Empty(DType dtype, std::vector<int64_t> shape, Allocator& alloc = HostAllocator());
  static Result<Tensor> Zeros(DType dtype, std::vector<int64_t> shape, Allocator& alloc = HostAllocator());
  // Wraps memory the caller keeps alive for the Tensor's lifetime; nothing is freed.
  static Tensor Borrow(void* data, DType dtype, std::vector<int64_t> shape, Device device = Device::kCpu);

  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(static_cast<size_t>(i)); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  bool defined() const { return data_ != nullptr || numel() == 0; }

  void* raw() const { return data_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_);
  }

  std::string DebugString() const;  // "f32[3, 4] cpu"

 private:
  struct Buffer;
  std::shared_ptr<Buffer> buffer_;
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
  std::vector<int64_t> shape_;
};

// A view of `t`'s memory with another shape (the same element count is the caller's to keep). It borrows:
// `t`'s memory must outlive the view.
inline Tensor ViewOf(const Tensor& t, std::vector<int64_t> shape) {
  return Tensor::Borrow(t.raw(), t.dtype(), std::move(shape), t.device());
}
inline Tensor FlatView(const Tensor& t) { return ViewOf(t, {t.numel()}); }

}  // namespace tessel

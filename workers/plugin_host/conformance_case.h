// The inputs of the conformance run (conformance.h): buffers between guard bytes, and the cases, one
// call's tensors each, generated from an op's schema and its recipe (what the schema cannot say: index
// ranges, CSR pointers, a random graph in the segment layout, the parameter struct, sizes that depend on
// others). Internal to workers/plugin_host.
// Thread safety: values and pure functions.
#pragma once

#include <tessel/bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/logging.h"
#include "core/status.h"
#include "core/tensor.h"
#include "workers/plugin_host/schema.h"

namespace tessel::workers::conformance {

using Sizes = std::map<std::string, int64_t>;

// ---------------------------------------------------------------------------------------------------
// Buffers between guard bytes.

inline constexpr size_t kGuard = 64;
inline constexpr uint8_t kGuardByte = 0xA5;

class Buffer {
 public:
  Buffer(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
    numel_ = 1;
    for (int64_t d : shape_) numel_ *= d;
    nbytes_ = static_cast<size_t>(numel_) * DTypeSize(dtype_);
    Allocate();
    std::memset(base_, kGuardByte, total());
  }
  Buffer(const Buffer& other)
      : dtype_(other.dtype_), shape_(other.shape_), numel_(other.numel_), nbytes_(other.nbytes_) {
    Allocate();
    std::memcpy(base_, other.base_, total());
  }
  Buffer& operator=(const Buffer& other) {
    if (this != &other) {
      Buffer copy(other);
      std::swap(dtype_, copy.dtype_);
      std::swap(shape_, copy.shape_);
      std::swap(numel_, copy.numel_);
      std::swap(nbytes_, copy.nbytes_);
      std::swap(raw_, copy.raw_);
      std::swap(base_, copy.base_);
    }
    return *this;
  }
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&&) noexcept = default;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return nbytes_; }
  size_t total() const { return nbytes_ + 2 * kGuard; }
  uint8_t* base() const { return base_; }  // the guard before the data
  void* data() const { return base_ + kGuard; }
  Tensor View() const { return Tensor::Borrow(data(), dtype_, shape_); }

  // Which guard changed: "" when both hold.
  std::string_view BrokenGuard() const {
    const auto changed = [](const uint8_t* p) {
      return std::any_of(p, p + kGuard, [](uint8_t b) { return b != kGuardByte; });
    };
    if (changed(base_)) return "before";
    if (changed(base_ + kGuard + nbytes_)) return "after";
    return "";
  }
  bool SameBytes(const Buffer& other) const {
    return nbytes_ == other.nbytes_ && std::memcmp(data(), other.data(), nbytes_) == 0;
  }

  double At(int64_t i) const {
    switch (dtype_) {
      case DType::kF32:
        return static_cast<const float*>(data())[i];
      case DType::kF64:
        return static_cast<const double*>(data())[i];
      case DType::kBF16:
        return ToFloat(static_cast<const Bf16*>(data())[i]);
      case DType::kI32:
        return static_cast<const int32_t*>(data())[i];
      case DType::kI64:
        return static_cast<double>(static_cast<const int64_t*>(data())[i]);
      case DType::kU8:
        return static_cast<const uint8_t*>(data())[i];
      case DType::kF16:
        return std::nan("");
    }
    return std::nan("");
  }
  void Set(int64_t i, double v) {
    switch (dtype_) {
      case DType::kF32:
        static_cast<float*>(data())[i] = static_cast<float>(v);
        break;
      case DType::kF64:
        static_cast<double*>(data())[i] = v;
        break;
      case DType::kBF16:
        static_cast<Bf16*>(data())[i] = ToBf16(static_cast<float>(v));
        break;
      case DType::kI32:
        static_cast<int32_t*>(data())[i] = static_cast<int32_t>(v);
        break;
      case DType::kI64:
        static_cast<int64_t*>(data())[i] = static_cast<int64_t>(v);
        break;
      case DType::kU8:
        static_cast<uint8_t*>(data())[i] = static_cast<uint8_t>(v);
        break;
      case DType::kF16:
        break;
    }
  }
  void Zero() { std::memset(data(), 0, nbytes_); }

 private:
  void Allocate() {
    raw_.assign(total() + 64, 0);
    const auto address = reinterpret_cast<uintptr_t>(raw_.data());
    base_ = raw_.data() + ((64 - address % 64) % 64);  // 64-byte aligned, as the host's tensors
  }

  DType dtype_;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  size_t nbytes_ = 0;
  std::vector<uint8_t> raw_;
  uint8_t* base_ = nullptr;
};

inline bool IsFloating(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16;
}

inline std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += StrCat(i == 0 ? "" : ",", shape[i]);
  return s + "]";
}

// One call's tensors.
struct Case {
  Sizes sizes;
  std::vector<std::string> input_names, output_names;
  std::vector<Buffer> inputs, outputs;
  std::vector<uint8_t> params;
  std::map<std::string, std::vector<int64_t>, std::less<>> layout;  // graph recipes: the layout by name

  std::string Describe() const {
    std::string s;
    for (const auto& [sym, n] : sizes) {
      if (sym[0] != '_') s += StrCat(s.empty() ? "" : ",", sym, "=", n);
    }
    return s;
  }
};

// Sizes 1; small odd; no multiple of a vector width; and (kTimingVariant) a timing shape, its largest
// tensor about a million elements.
inline constexpr int kVariants = 3;
inline constexpr int kTimingVariant = 3;

// "llm.layernorm.bwd_from_output" -> "llm.layernorm.fwd"; empty when `op` is no backward op.
std::string ForwardOf(std::string_view op);

// Whether `op` updates its inputs (optim.*): they are then compared, not held fixed.
bool UpdatesInputs(std::string_view op);

// A case of `schema` for floating dtype `t`: sizes of `variant`, random values from `seed`. A UsageError
// says why the op cannot be generated (no recipe for an index input or its parameters).
Result<Case> Generate(const Schema& schema, DType t, int variant, uint64_t seed);

// The case of a backward op from its forward's case after the forward ran: the inputs the forward took
// or computed (X, W, Y, mean, rstd, lse, the layout) by name, each d<output> a random cotangent, the
// outputs random (some are added to). A UsageError when an input is none of those.
Result<Case> BindBackward(const Schema& bwd, const Case& forward, DType t, uint64_t seed);

}  // namespace tessel::workers::conformance

// Rows of a kernel's dtype T in its accumulation type (kernel_support.h's Accumulate<T>), for CPU kernel
// bodies written once for float, double and bf16: a bf16 row is widened into a float scratch row,
// computed on there, and rounded once when it is stored (tessel/bf16.h); a float or double row is used in
// place and nothing is copied (the scratch is then never touched: size it with ScratchSize).
// Thread safety: pure functions over caller-owned memory.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernel_support.h"

namespace tessel::kernels {

// Whether T is stored in another type than it is computed in (bf16).
template <typename T>
inline constexpr bool kWidened = !std::is_same_v<T, Accumulate<T>>;

// The scratch a body needs for `n` widened values: n for bf16, none otherwise.
template <typename T>
std::vector<Accumulate<T>> ScratchRow(int64_t n) {
  return std::vector<Accumulate<T>>(kWidened<T> ? static_cast<size_t>(n) : 0);
}

// row[0, n) as Accumulate<T>: `row` itself, or widened into `scratch`.
template <typename T>
const Accumulate<T>* Widened(const T* row, int64_t n, Accumulate<T>* scratch) {
  if constexpr (kWidened<T>) {
    for (int64_t i = 0; i < n; ++i) scratch[i] = ToAccumulate(row[i]);
    return scratch;
  } else {
    return row;
  }
}

// Where to compute a row that is then stored into `row` (with Store): `row` itself, or `scratch`.
template <typename T>
Accumulate<T>* ComputeInto(T* row, Accumulate<T>* scratch) {
  if constexpr (kWidened<T>) {
    return scratch;
  } else {
    return row;
  }
}

// Stores a row computed into ComputeInto(row, ...) : rounds it into `row` (a no-op when it is `row`).
template <typename T>
void Store(const Accumulate<T>* computed, int64_t n, T* row) {
  if constexpr (kWidened<T>) {
    for (int64_t i = 0; i < n; ++i) row[i] = FromAccumulate<T>(computed[i]);
  }
}

// A row of T to add into in place: widened into `scratch` (then Store it back), or `row` itself.
template <typename T>
Accumulate<T>* WidenedInPlace(T* row, int64_t n, Accumulate<T>* scratch) {
  if constexpr (kWidened<T>) {
    for (int64_t i = 0; i < n; ++i) scratch[i] = ToAccumulate(row[i]);
    return scratch;
  } else {
    return row;
  }
}

}  // namespace tessel::kernels

// Helpers for the tests of libtessel_llm.so, over kernel_test_util.h (whose registry loads the llm plugin
// too): call shorthands, bit comparison and random tokens.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {

// kernel_test_util.h's helpers, under the names these tests use (BuiltinRegistry() loads the llm plugin
// with the others).
inline Status TryCallLlm(std::string_view op, const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, ThreadPool* pool, const void* params = nullptr,
                         size_t params_size = 0) {
  return TryCallCpu(op, inputs, outputs, pool, params, params_size);
}
inline void CallLlm(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                    ThreadPool* pool, const void* params = nullptr, size_t params_size = 0) {
  CallCpu(op, inputs, outputs, pool, params, params_size);
}
template <typename P>
void CallLlmWith(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                 const P& params, ThreadPool* pool) {
  CallLlm(op, inputs, outputs, pool, &params, sizeof(P));
}
template <typename P>
Status TryCallLlmWith(std::string_view op, const std::vector<const Tensor*>& inputs,
                      const std::vector<Tensor*>& outputs, const P& params, ThreadPool* pool) {
  return TryCallLlm(op, inputs, outputs, pool, &params, sizeof(P));
}
inline void RequireLlmCudaKernels(const std::vector<std::string>& ops) { RequireCudaKernels(ops); }
inline void CompareLlmDevices(const std::string& op, const std::vector<Tensor>& inputs,
                              const std::vector<Tensor>& outputs, double tol, const void* params = nullptr,
                              size_t params_size = 0) {
  CompareDevices(op, inputs, outputs, tol, params, params_size);
}
template <typename P>
void CompareLlmDevicesWith(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                           double tol, const P& params) {
  CompareLlmDevices(op, inputs, outputs, tol, &params, sizeof(P));
}

// Whether two vectors hold the same bits.
template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Random token ids in [0, v), int32 as the llm ops take them.
std::vector<int32_t> RandomTokens(int64_t n, int32_t v, uint64_t seed);

}  // namespace tessel::kernel_test

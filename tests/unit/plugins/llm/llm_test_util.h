// Helpers for the tests of libtessel_llm.so. kernel_test_util's BuiltinRegistry() loads the nn, rgnn
// and gather plugins only, so these load libtessel_llm.so into a registry of their own and mirror
// CallCpu, TryCallCpu, RequireCudaKernels and CompareDevices over it; the tensors, tolerances and
// finite differences of kernel_test_util.h are used as they are.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "../kernel_test_util.h"

namespace tessel::kernel_test {

// A registry with build/plugins/libtessel_llm.so loaded, shared by the tests of this binary.
const workers::KernelRegistry& LlmRegistry();

// (op, cpu) of libtessel_llm.so: the status, or asserting success.
Status TryCallLlm(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                  ThreadPool* pool, const void* params = nullptr, size_t params_size = 0);
void CallLlm(std::string_view op, const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
             ThreadPool* pool, const void* params = nullptr, size_t params_size = 0);
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

// Skips the current test unless the CUDA kernels of `ops` can run here (built with CUDA, a GPU
// visible), saying why. Call from SetUp or the test body, then `if (IsSkipped()) return;`.
void RequireLlmCudaKernels(const std::vector<std::string>& ops);

// Runs `op` on CPU and on CUDA from the same inputs and output buffers, then compares every output and
// every input (unchanged) with ExpectNear's relative tolerance `tol`.
void CompareLlmDevices(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                       double tol, const void* params = nullptr, size_t params_size = 0);
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

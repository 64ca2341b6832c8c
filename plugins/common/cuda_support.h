// CUDA plumbing shared by the built-in plugins' CUDA kernels: error checks that throw KernelError
// (caught by RunGuarded), launch geometry for grid-stride loops, a row-major cuBLAS GEMM overloaded for
// float, double and bf16, and the plugin's pool of cuBLAS handles. Scratch memory comes from the host's
// workspace allocator (Workspace<T> in kernel_support.h), never from a hidden cudaMalloc.
// Include from .cu files only.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kernel_support.h"

namespace tessel::kernels {

void CheckCuda(cudaError_t err, const char* what);
void CheckCublas(cublasStatus_t status, const char* what);

inline cudaStream_t StreamOf(const KernelArgs& args) { return static_cast<cudaStream_t>(args.cuda_stream()); }

constexpr int kThreads = 256;
// Blocks for a grid-stride loop over n items (at least 1, capped: the loop covers the rest).
inline unsigned Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 16 ? 65535 * 16 : blocks));
}

// Copies n values from the device and waits for them (the stream is synchronised).
std::vector<int64_t> CopyToHost(const int64_t* device, int64_t n, cudaStream_t stream);

// Checks a launch (configuration errors surface here; execution errors at the next synchronisation).
inline void CheckLaunch(const char* kernel) { CheckCuda(cudaGetLastError(), kernel); }

// Row-major C[m x n] = alpha op(A) op(B) + beta C, on `handle`'s stream. k == 0 with beta == 0 zeroes a
// contiguous C (ldc == n).
void GemmRowMajor(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void GemmRowMajor(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha,
                  const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);
// bf16 operands (cublasGemmEx): products and sums in f32 on the tensor cores, C in bf16 (the f32 result
// rounded once, beta C read widened) or in f32.
void GemmRowMajor(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta, Bf16* c, int64_t ldc);
void GemmRowMajor(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta, float* c, int64_t ldc);

// cuBLASLt's fused linear forward, row-major: Pre = X[n, k] W[o, k]^T + b with f32 sums, the bias added in
// the matmul's epilogue; with `gelu` non-null also gelu = GELU_tanh(Pre) (CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
// the GELU of the f32 value, and Pre kept as the epilogue's auxiliary output). `type` is the dtype of X, W,
// b, Pre and gelu: CUDA_R_32F or CUDA_R_16BF (bf16 operands on the tensor cores, each output rounded once).
// `workspace` (`workspace_bytes`) is cuBLASLt's scratch. Returns false, having queued nothing, where
// cuBLASLt offers no algorithm for the shape, the pointers' alignment or the epilogue (k == 0, say): the
// caller then computes it unfused. Queued on `stream`; cuBLASLt's errors throw KernelError.
bool LinearEpilogueLt(cudaStream_t stream, cudaDataType_t type, int64_t n, int64_t k, int64_t o, const void* x,
                      const void* w, const void* b, void* pre, void* gelu, void* workspace, size_t workspace_bytes);

// cuBLAS handles are costly to create and must not be shared by concurrent calls, and a handle's
// workspace must not be used by two streams at once. So the plugin keeps idle handles per (device,
// stream) and lends one per call: work queued through a handle is ordered on the one stream it serves.
class CublasPool {
 public:
  struct Key {
    int device;
    cudaStream_t stream;
    bool operator==(const Key& other) const { return device == other.device && stream == other.stream; }
  };

  class Lease {
   public:
    Lease(CublasPool* pool, Key key, cublasHandle_t handle) : pool_(pool), key_(key), handle_(handle) {}
    ~Lease() { pool_->Release(key_, handle_); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    cublasHandle_t get() const { return handle_; }

   private:
    CublasPool* pool_;
    Key key_;
    cublasHandle_t handle_;
  };

  CublasPool() = default;
  ~CublasPool();
  CublasPool(const CublasPool&) = delete;
  CublasPool& operator=(const CublasPool&) = delete;

  // A handle for the current device, bound to `stream`.
  Lease Acquire(cudaStream_t stream);

 private:
  void Release(Key key, cublasHandle_t handle);

  std::mutex mu_;
  std::vector<std::pair<Key, cublasHandle_t>> idle_;
};

struct CudaKernelState {
  CublasPool blas;
};

inline CudaKernelState& StateOf(const KernelArgs& args) { return *static_cast<CudaKernelState*>(args.state()); }

}  // namespace tessel::kernels

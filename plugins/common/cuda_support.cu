#include "cuda_support.h"

namespace tessel::kernels {

void CheckCuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    Fail(TESSEL_STATUS_INTERNAL, std::string("CUDA error in ") + what + ": " + cudaGetErrorString(err));
  }
}

void CheckCublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    Fail(TESSEL_STATUS_INTERNAL, std::string("cuBLAS error in ") + what + ": " + cublasGetStatusString(status));
  }
}

std::vector<int64_t> CopyToHost(const int64_t* device, int64_t n, cudaStream_t stream) {
  std::vector<int64_t> host(static_cast<size_t>(n));
  if (n > 0) {
    CheckCuda(cudaMemcpyAsync(host.data(), device, n * sizeof(int64_t), cudaMemcpyDeviceToHost, stream),
              "copy to host");
    CheckCuda(cudaStreamSynchronize(stream), "stream synchronize");
  }
  return host;
}

namespace {

int CheckedInt(int64_t v) {
  if (v > INT32_MAX) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "matrix too large for cuBLAS");
  return static_cast<int>(v < 1 ? 1 : v);
}

cublasOperation_t Op(Trans t) { return t == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N; }

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands, keep the ops.
template <typename T, typename GemmFn>
void RowMajorGemm(GemmFn gemm, cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, T alpha,
                  const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta != T(0) || ldc != n) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "GEMM with k = 0 and beta != 0");
    cudaStream_t stream = nullptr;
    CheckCublas(cublasGetStream(handle, &stream), "cublasGetStream");
    CheckCuda(cudaMemsetAsync(c, 0, m * n * sizeof(T), stream), "zero C");
    return;
  }
  CheckCublas(gemm(handle, Op(tb), Op(ta), CheckedInt(n), CheckedInt(m), CheckedInt(k), &alpha, b, CheckedInt(ldb), a,
                   CheckedInt(lda), &beta, c, CheckedInt(ldc)),
              "gemm");
}

// The same with bf16 operands through cublasGemmEx: products and sums in f32 (CUBLAS_COMPUTE_32F, tensor
// cores), C of `c_type` (bf16, rounded once from the f32 result, or f32).
template <typename C>
void RowMajorGemmBf16(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta, C* c, int64_t ldc,
                      cudaDataType_t c_type) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta != 0.f || ldc != n) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "GEMM with k = 0 and beta != 0");
    cudaStream_t stream = nullptr;
    CheckCublas(cublasGetStream(handle, &stream), "cublasGetStream");
    CheckCuda(cudaMemsetAsync(c, 0, m * n * sizeof(C), stream), "zero C");
    return;
  }
  CheckCublas(cublasGemmEx(handle, Op(tb), Op(ta), CheckedInt(n), CheckedInt(m), CheckedInt(k), &alpha, b, CUDA_R_16BF,
                           CheckedInt(ldb), a, CUDA_R_16BF, CheckedInt(lda), &beta, c, c_type, CheckedInt(ldc),
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "gemm (bf16)");
}

}  // namespace

void GemmRowMajor(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta, Bf16* c, int64_t ldc) {
  RowMajorGemmBf16(handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, CUDA_R_16BF);
}

void GemmRowMajor(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  RowMajorGemmBf16(handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, CUDA_R_32F);
}

void GemmRowMajor(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  RowMajorGemm(&cublasSgemm, handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void GemmRowMajor(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha,
                  const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  RowMajorGemm(&cublasDgemm, handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

CublasPool::~CublasPool() {
  // Runs at dlclose. Errors are ignored: at process exit the CUDA context may already be gone.
  for (auto& [key, handle] : idle_) cublasDestroy(handle);
}

CublasPool::Lease CublasPool::Acquire(cudaStream_t stream) {
  Key key{0, stream};
  CheckCuda(cudaGetDevice(&key.device), "cudaGetDevice");
  cublasHandle_t handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (it->first == key) {
        handle = it->second;
        idle_.erase(it);
        break;
      }
    }
  }
  if (handle == nullptr) {
    CheckCublas(cublasCreate(&handle), "cublasCreate");
    if (cublasStatus_t status = cublasSetStream(handle, stream); status != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(handle);
      CheckCublas(status, "cublasSetStream");
    }
  }
  return Lease(this, key, handle);
}

void CublasPool::Release(Key key, cublasHandle_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.emplace_back(key, handle);
}

void* CudaState() {
  static CudaKernelState state;
  return &state;
}

}  // namespace tessel::kernels

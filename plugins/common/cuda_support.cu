#include <array>
#include <map>
#include <memory>
#include <optional>

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

namespace {

// One cuBLASLt handle per device, made on first use and kept for the process (plugins stay mapped; a
// handle carries no stream, and cuBLASLt's calls may share one across threads).
cublasLtHandle_t LtHandle() {
  static std::mutex mu;
  static std::vector<cublasLtHandle_t> handles;
  int device = 0;
  CheckCuda(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mu);
  if (handles.size() <= static_cast<size_t>(device)) handles.resize(static_cast<size_t>(device) + 1, nullptr);
  if (handles[static_cast<size_t>(device)] == nullptr) {
    CheckCublas(cublasLtCreate(&handles[static_cast<size_t>(device)]), "cublasLtCreate");
  }
  return handles[static_cast<size_t>(device)];
}

// The largest power of two (up to 256) that divides the address: the alignment cuBLASLt may assume.
uint32_t AlignmentOf(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// The descriptors of one cuBLASLt matmul, destroyed with it.
struct LtMatmul {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtMatmul() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

template <typename V>
void SetOp(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attribute, const V& value) {
  CheckCublas(cublasLtMatmulDescSetAttribute(op, attribute, &value, sizeof(value)), "cublasLtMatmulDescSetAttribute");
}

template <typename V>
void SetPref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute, const V& value) {
  CheckCublas(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)),
              "cublasLtMatmulPreferenceSetAttribute");
}

}  // namespace

bool LinearEpilogueLt(cudaStream_t stream, cudaDataType_t type, int64_t n, int64_t k, int64_t o, const void* x,
                      const void* w, const void* b, void* pre, void* gelu, void* workspace, size_t workspace_bytes) {
  if (n <= 0 || k <= 0 || o <= 0 || n > INT32_MAX || k > INT32_MAX || o > INT32_MAX) return false;
  // The bias and the auxiliary output are read and written as vectors: cuBLASLt asks 16-byte alignment of
  // them and a leading dimension of the auxiliary output that is a multiple of 8.
  if (AlignmentOf(b) < 16 || (gelu != nullptr && (AlignmentOf(pre) < 16 || o % 8 != 0))) return false;
  void* d = gelu != nullptr ? gelu : pre;
  // The descriptors and the heuristic's choice depend only on the problem, the epilogue and the
  // alignments: made once per combination (a GPT step makes the same few calls every time) and kept, the
  // answer "none" included; only the pointers are set per call, under the lock, which the enqueue holds too.
  int device = 0;
  CheckCuda(cudaGetDevice(&device), "cudaGetDevice");
  const std::array<int64_t, 12> key{device,
                                    static_cast<int64_t>(type),
                                    n,
                                    k,
                                    o,
                                    gelu != nullptr,
                                    AlignmentOf(w),
                                    AlignmentOf(x),
                                    AlignmentOf(d),
                                    AlignmentOf(b),
                                    gelu != nullptr ? AlignmentOf(pre) : 0,
                                    static_cast<int64_t>(workspace_bytes)};
  struct Plan {
    LtMatmul m;
    std::optional<cublasLtMatmulAlgo_t> algo;
  };
  static std::mutex mu;
  // Leaked, as LtHandle's handles are: a thread still in here at exit must not see it destroyed.
  static auto& plans = *new std::map<std::array<int64_t, 12>, std::unique_ptr<Plan>>;
  cublasLtHandle_t handle = LtHandle();
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<Plan>& plan = plans[key];
  if (plan == nullptr) {
    // Column-major, D^T = Y^T [o x n] (ld o) = op(A) B with A = W as stored ([k x o], ld k, transposed)
    // and B = X as stored ([k x n], ld k).
    auto made = std::make_unique<Plan>();
    LtMatmul& m = made->m;
    CheckCublas(cublasLtMatmulDescCreate(&m.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    SetOp(m.op, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    SetOp(m.op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    SetOp(m.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
          gelu == nullptr ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
    SetOp(m.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, b);
    if (gelu != nullptr) {
      SetOp(m.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, pre);
      SetOp(m.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, o);
    }
    CheckCublas(cublasLtMatrixLayoutCreate(&m.a, type, static_cast<uint64_t>(k), static_cast<uint64_t>(o), k),
                "cublasLtMatrixLayoutCreate(W)");
    CheckCublas(cublasLtMatrixLayoutCreate(&m.b, type, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k),
                "cublasLtMatrixLayoutCreate(X)");
    CheckCublas(cublasLtMatrixLayoutCreate(&m.d, type, static_cast<uint64_t>(o), static_cast<uint64_t>(n), o),
                "cublasLtMatrixLayoutCreate(Y)");
    CheckCublas(cublasLtMatmulPreferenceCreate(&m.pref), "cublasLtMatmulPreferenceCreate");
    SetPref(m.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes));
    SetPref(m.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, AlignmentOf(w));
    SetPref(m.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, AlignmentOf(x));
    SetPref(m.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, AlignmentOf(d));
    SetPref(m.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, AlignmentOf(d));
    cublasLtMatmulHeuristicResult_t found{};
    int count = 0;
    if (cublasLtMatmulAlgoGetHeuristic(handle, m.op, m.a, m.b, m.d, m.d, m.pref, 1, &found, &count) ==
            CUBLAS_STATUS_SUCCESS &&
        count > 0) {
      made->algo = found.algo;
    }
    plan = std::move(made);  // only once whole: after a failure (it throws) the next call makes it again
  }
  if (!plan->algo) return false;
  SetOp(plan->m.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, b);
  if (gelu != nullptr) SetOp(plan->m.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, pre);
  const float one = 1.f, zero = 0.f;
  CheckCublas(cublasLtMatmul(handle, plan->m.op, &one, w, plan->m.a, x, plan->m.b, &zero, d, plan->m.d, d, plan->m.d,
                             &*plan->algo, workspace, workspace_bytes, stream),
              "cublasLtMatmul");
  return true;
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

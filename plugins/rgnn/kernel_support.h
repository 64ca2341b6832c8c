// The C++ side of the plugin boundary, shared by every rgnn kernel (CPU and CUDA host code).
//
// A kernel body is plain C++ that may throw: RunGuarded() catches everything and turns it into a
// tessel_status*, so no exception ever reaches the host. KernelArgs checks and unpacks the tensors of a
// call; ParallelFor runs a lambda on the host's thread pool and carries an exception thrown inside it
// back to the calling thread.
//
//   tessel_status* ReluFwdCpu(void*, const tessel_kernel_call* call) {
//     return RunGuarded(call, [&] {
//       KernelArgs args(call, TESSEL_DEVICE_CPU, /*num_inputs=*/1, /*num_outputs=*/1);
//       DispatchFloating(args.in(0).dtype, [&](auto zero) { ReluFwd<decltype(zero)>(args); });
//     });
//   }
//
// Thread safety: a KernelArgs belongs to one call; ParallelFor may be called from the kernel's thread.
#pragma once

#include <tessel/plugin.h>

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace tessel::rgnn {

// An error a kernel reports: its code travels to the host with the message.
class KernelError : public std::runtime_error {
 public:
  KernelError(tessel_status_code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  tessel_status_code code() const { return code_; }

 private:
  tessel_status_code code_;
};

[[noreturn]] inline void Fail(tessel_status_code code, const std::string& message) { throw KernelError(code, message); }

template <typename T>
constexpr int32_t DTypeCode();
template <>
constexpr int32_t DTypeCode<float>() {
  return TESSEL_DTYPE_F32;
}
template <>
constexpr int32_t DTypeCode<double>() {
  return TESSEL_DTYPE_F64;
}
template <>
constexpr int32_t DTypeCode<int32_t>() {
  return TESSEL_DTYPE_I32;
}
template <>
constexpr int32_t DTypeCode<int64_t>() {
  return TESSEL_DTYPE_I64;
}
template <>
constexpr int32_t DTypeCode<uint8_t>() {
  return TESSEL_DTYPE_U8;
}

const char* DTypeLabel(int32_t dtype);

// Runs `body` and converts whatever it throws into a status made by the host. Null means success.
template <typename Body>
tessel_status* RunGuarded(const tessel_kernel_call* call, Body&& body) noexcept {
  auto make = [call](int32_t code, const char* message) -> tessel_status* {
    return call->make_status(call->host_ctx, code, message);
  };
  try {
    body();
    return nullptr;
  } catch (const KernelError& e) {
    return make(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return make(TESSEL_STATUS_INTERNAL, "out of host memory");
  } catch (const std::exception& e) {
    return make(TESSEL_STATUS_INTERNAL, e.what());
  } catch (...) {
    return make(TESSEL_STATUS_INTERNAL, "unknown exception in a kernel");
  }
}

// Calls f(T{}) with T = float or double, by the floating dtype code.
template <typename F>
void DispatchFloating(int32_t dtype, F&& f) {
  if (dtype == TESSEL_DTYPE_F32) {
    f(float{});
  } else if (dtype == TESSEL_DTYPE_F64) {
    f(double{});
  } else {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         std::string("expected a floating dtype (f32 or f64), got ") + DTypeLabel(dtype));
  }
}

// Whether a GEMM operand is transposed (blas.h on CPU, cuda_support.h on CUDA).
enum class Trans { kNo, kYes };

// A dimension slot for KernelArgs::In/Out: -1 means "not yet known, bind it"; any other value must
// match. `int64_t n = kUnbound;` reads better at the call site than a bare -1.
inline constexpr int64_t kUnbound = -1;

class KernelArgs {
 public:
  // Checks the call's layout, its device and the number of tensors.
  KernelArgs(const tessel_kernel_call* call, int32_t device, int32_t num_inputs, int32_t num_outputs);

  const tessel_tensor& in(int i) const { return call_->inputs[i]; }
  const tessel_tensor& out(int i) const { return call_->outputs[i]; }

  // The data of input/output i, after checking its dtype (T), its rank (dims.size()) and each size
  // against *dims[j] (binding it when kUnbound). `name` is for error messages.
  template <typename T>
  const T* In(int i, const char* name, std::initializer_list<int64_t*> dims) const {
    return static_cast<const T*>(Check(in(i), DTypeCode<T>(), "input", name, dims));
  }
  // An input that the op updates in place (optim.adam.step).
  template <typename T>
  T* InMutable(int i, const char* name, std::initializer_list<int64_t*> dims) const {
    return static_cast<T*>(Check(in(i), DTypeCode<T>(), "input", name, dims));
  }
  template <typename T>
  T* Out(int i, const char* name, std::initializer_list<int64_t*> dims) const {
    return static_cast<T*>(Check(out(i), DTypeCode<T>(), "output", name, dims));
  }

  void* cuda_stream() const { return call_->cuda_stream; }

  // Runs fn(begin, end) over chunks of [0, n), each at least `grain` long, on the host's pool. The
  // first exception thrown by fn is rethrown here once every chunk has finished.
  template <typename F>
  void ParallelFor(int64_t n, int64_t grain, F&& fn) const {
    if (n <= 0) return;
    struct Context {
      F* fn;
      std::mutex mu;
      std::exception_ptr error;
    } ctx{&fn, {}, nullptr};
    tessel_range_fn trampoline = [](void* p, int64_t begin, int64_t end) noexcept {
      auto* c = static_cast<Context*>(p);
      try {
        (*c->fn)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(c->mu);
        if (!c->error) c->error = std::current_exception();
      }
    };
    if (call_->parallel_for != nullptr) {
      call_->parallel_for(call_->host_ctx, n, grain, trampoline, &ctx);
    } else {
      trampoline(&ctx, 0, n);
    }
    if (ctx.error) std::rethrow_exception(ctx.error);
  }

 private:
  void* Check(const tessel_tensor& t, int32_t dtype, const char* role, const char* name,
              std::initializer_list<int64_t*> dims) const;

  const tessel_kernel_call* call_;
  int32_t device_;
};

}  // namespace tessel::rgnn

// The C++ side of the plugin boundary, shared by the built-in plugins (libtessel_nn, libtessel_rgnn) and
// linked into each as a static library (hidden, like everything but tessel_plugin_init).
//
// An op's arguments are bound once, by its binder: a struct templated over the floating dtype, in the
// plugin's `<op>_args.h`, that names the op and reads, binds and checks every tensor and parameter of a
// call. The CPU and CUDA kernels of the op and every dtype share it; a kernel is a class with one body,
// templated over the dtype, that receives the bound arguments and only computes:
//
//   template <typename T>
//   struct AddArgs {                                   // nn/elementwise_args.h
//     static const tessel_op_decl& Decl() { return tessel_op_nn_add; }
//     static AddArgs Bind(const KernelArgs& args);     // binds A, B and C [N]; may throw
//     int64_t n;
//     const T *a, *b;
//     T* c;
//   };
//   struct AddCpu {                                    // nn/elementwise_cpu.cc (elementwise.cu: AddCuda)
//     template <typename T>
//     static void Run(const KernelArgs& args, const AddArgs<T>& t);  // may throw
//   };
//   TESSEL_DEFINE_KERNEL(AddCpu, AddArgs, TESSEL_DEVICE_CPU)
//
// Bind may return a base of Args<T> that several ops share (nn/activation_args.h): Run takes what Bind
// returns.
//
// Entry<Kernel, Args, Device> is the one shim between the C ABI and such a pair: it checks the call
// against the op's declaration, dispatches on the call's T (the dtype of the op's first T argument),
// binds the arguments, runs the body and turns whatever they throw into a host status, so no exception
// reaches the host. A binder checks the values the kernel indexes with (ids, offsets) only where they
// are host memory (KernelArgs::data_check): CUDA kernels trust them.
// Thread safety: a KernelArgs belongs to one call; ParallelFor may be called from the kernel's thread.
#pragma once

#include <tessel/bf16.h>
#include <tessel/ops/op.h>
#include <tessel/plugin.h>

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace tessel::kernels {

// An error a kernel reports: its code travels to the host with the message.
class KernelError : public std::runtime_error {
 public:
  KernelError(tessel_status_code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  tessel_status_code code() const { return code_; }

 private:
  tessel_status_code code_;
};

// A status the host already made (a failed workspace allocation): returned to the host as it is.
struct HostStatusError {
  tessel_status* status;
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
constexpr int32_t DTypeCode<Bf16>() {
  return TESSEL_DTYPE_BF16;
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
  } catch (const HostStatusError& e) {
    return e.status;
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

// The schema's A for a call whose T is T: what a bf16 kernel accumulates and keeps its statistics and
// parameter gradients in (float), and double for double.
template <typename T>
using Accumulate = std::conditional_t<std::is_same_v<T, double>, double, float>;

// A stored value in its accumulation type, and an accumulated value stored as T (bf16: rounded to
// nearest, ties to even, tessel/bf16.h).
TESSEL_HOST_DEVICE inline float ToAccumulate(float x) { return x; }
TESSEL_HOST_DEVICE inline double ToAccumulate(double x) { return x; }
TESSEL_HOST_DEVICE inline float ToAccumulate(Bf16 x) { return ToFloat(x); }
template <typename T>
TESSEL_HOST_DEVICE inline T FromAccumulate(Accumulate<T> x) {
  if constexpr (std::is_same_v<T, Bf16>) {
    return ToBf16(x);
  } else {
    return x;
  }
}

// Calls f(T{}) with T = float or double (and Bf16 when kBf16), by the floating dtype code.
template <bool kBf16, typename F>
void DispatchFloating(int32_t dtype, F&& f) {
  if (dtype == TESSEL_DTYPE_F32) {
    f(float{});
  } else if (dtype == TESSEL_DTYPE_F64) {
    f(double{});
  } else if (kBf16 && dtype == TESSEL_DTYPE_BF16) {
    if constexpr (kBf16) f(Bf16{});
  } else {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         std::string("expected a floating dtype (f32, f64") + (kBf16 ? ", bf16" : "") + "), got " + DTypeLabel(dtype));
  }
}

// Where a schema's first T argument is: {false, i} for input i, {true, i} for output i; {false, -1}
// when it has none.
struct ArgPosition {
  bool output = false;
  int32_t index = -1;
};
ArgPosition FirstFloatingArg(const char* schema);

// Whether a GEMM operand is transposed (blas.h on CPU, cuda_support.h on CUDA).
enum class Trans { kNo, kYes };

// How much of a call a binder checks (KernelArgs::data_check).
enum class DataCheck {
  kFull,        // shapes, parameters, and the values a kernel indexes with (ids, offsets): host memory
  kShapesOnly,  // shapes and parameters only: the data is on the device, and the kernels trust it
};

// A dimension slot for KernelArgs::In/Out: -1 means "not yet known, bind it"; any other value must
// match. `int64_t n = kUnbound;` reads better at the call site than a bare -1.
inline constexpr int64_t kUnbound = -1;

class KernelArgs {
 public:
  // Checks the call's layout, its device and the numbers of tensors against `op`'s schema.
  KernelArgs(const tessel_kernel_call* call, int32_t device, const tessel_op_decl& op, void* state);

  const tessel_tensor& in(int i) const { return call_->inputs[i]; }
  const tessel_tensor& out(int i) const { return call_->outputs[i]; }
  const tessel_op_decl& op() const { return op_; }
  void* state() const { return state_; }

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

  // The op's parameter struct. Fails unless the host passed exactly the struct this plugin was built
  // with (the loader already refuses a kernel whose params_size differs from the host's).
  template <typename P>
  const P& Params() const {
    CheckParams(sizeof(P));
    return *static_cast<const P*>(call_->params);
  }

  // kFull for a CPU kernel, whose binder also reads its index arrays; kShapesOnly for a CUDA kernel.
  DataCheck data_check() const { return device_ == TESSEL_DEVICE_CPU ? DataCheck::kFull : DataCheck::kShapesOnly; }

  void* cuda_stream() const { return call_->cuda_stream; }
  int32_t device_ordinal() const { return call_->device_ordinal; }

  // Scratch memory on the kernel's device from the host's workspace allocator (counted against the
  // worker's memory budget). Throws the host's status when it has no room. Free with FreeWorkspace,
  // or leave it: the host reclaims it when the call returns.
  void* AllocateWorkspace(size_t bytes) const;
  void FreeWorkspace(void* ptr) const;

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
  void CheckParams(size_t size) const;

  const tessel_kernel_call* call_;
  int32_t device_;
  const tessel_op_decl& op_;
  void* state_;
};

// Typed scratch memory for the duration of a kernel body (see KernelArgs::AllocateWorkspace).
template <typename T>
class Workspace {
 public:
  Workspace(const KernelArgs& args, int64_t count)
      : args_(args), ptr_(count > 0 ? static_cast<T*>(args.AllocateWorkspace(sizeof(T) * count)) : nullptr) {}
  ~Workspace() {
    if (ptr_ != nullptr) args_.FreeWorkspace(ptr_);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  T* get() const { return ptr_; }

 private:
  const KernelArgs& args_;
  T* ptr_;
};

// The shim every kernel goes through (see the top of this file). Args<float>::Decl() names the op: the
// declaration does not depend on the dtype.
// The call's T is the dtype of the op's first T argument (its first input for most ops).
template <class Kernel, template <typename> class Args, int32_t kDevice, bool kBf16>
tessel_status* Entry(void* state, const tessel_kernel_call* call) noexcept {
  return RunGuarded(call, [&] {
    const KernelArgs args(call, kDevice, Args<float>::Decl(), state);
    static const ArgPosition where = FirstFloatingArg(Args<float>::Decl().schema);
    const int32_t dtype = where.index < 0 ? TESSEL_DTYPE_F32
                          : where.output  ? args.out(where.index).dtype
                                          : args.in(where.index).dtype;
    DispatchFloating<kBf16>(dtype, [&](auto zero) {
      using T = decltype(zero);
      Kernel::Run(args, Args<T>::Bind(args));
    });
  });
}

// The kernel_state of every CUDA kernel of a plugin (cuda_support.cu, CUDA builds only): its pool of
// cuBLAS handles per (device, stream). Owned by the plugin (static storage), valid while it is loaded.
void* CudaState();

struct KernelRegistration {
  const tessel_op_decl* op;
  tessel_kernel_fn fn;
  uint32_t floating_dtypes;  // TESSEL_DTYPE_BIT()s of the T the kernel takes
};

template <class Kernel, template <typename> class Args, int32_t kDevice, bool kBf16 = false>
KernelRegistration Register() {
  constexpr uint32_t kFloat = TESSEL_DTYPE_BIT(TESSEL_DTYPE_F32) | TESSEL_DTYPE_BIT(TESSEL_DTYPE_F64);
  return KernelRegistration{&Args<float>::Decl(), &Entry<Kernel, Args, kDevice, kBf16>,
                            kBf16 ? kFloat | TESSEL_DTYPE_BIT(TESSEL_DTYPE_BF16) : kFloat};
}

// Registers every kernel of `table` for `device` with the op's declared name, schema and parameter
// size. Returns the host's status of the first refusal, or null.
tessel_status* RegisterKernels(const tessel_host_api* host, const KernelRegistration* table, size_t count,
                               int32_t device, void* state);
template <size_t N>
tessel_status* RegisterKernels(const tessel_host_api* host, const KernelRegistration (&table)[N], int32_t device,
                               void* state) {
  return RegisterKernels(host, table, N, device, state);
}

}  // namespace tessel::kernels

// Defines `tessel::kernels::KernelRegistration NAMEKernel()` for the kernel class NAME, whose arguments
// the binder template ARGS binds, on DEVICE; the plugin's init function collects it into its
// registration table. Use at namespace tessel::kernels scope (or a namespace inside it), after the class.
#define TESSEL_DEFINE_KERNEL(NAME, ARGS, DEVICE) \
  KernelRegistration NAME##Kernel() { return Register<NAME, ARGS, DEVICE>(); }
// The same for a kernel whose body also runs with T = tessel::Bf16 (bf16 storage; it computes in
// Accumulate<T> = float and rounds each stored result once, tessel/bf16.h).
#define TESSEL_DEFINE_KERNEL_BF16(NAME, ARGS, DEVICE) \
  KernelRegistration NAME##Kernel() { return Register<NAME, ARGS, DEVICE, true>(); }

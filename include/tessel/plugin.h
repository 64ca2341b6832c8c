/* Tessel plugin ABI, version 1.1. Plain C: a plugin built against this header with any C or C++
 * compiler loads into any Tessel host with the same ABI major and an equal or newer ABI minor.
 *
 * A plugin exports exactly one symbol:
 *
 *   tessel_status* tessel_plugin_init(const tessel_host_api* host, tessel_plugin_info* info);
 *
 * In it, the plugin fills `info` (its name, version and the ABI it was built against) and registers
 * its kernels with host->register_kernel(host->registry, &def). It returns NULL on success or a status
 * made with host->make_status on failure. The host checks the ABI version before it commits any
 * registration, so a plugin with the wrong major is refused without side effects.
 *
 * Rules of the boundary:
 *  - Every struct begins with `struct_size`; fields are only ever appended. A reader checks
 *    struct_size before touching a field added in a later minor.
 *  - No C++ exception crosses it: a kernel returns a tessel_status* (NULL = success).
 *  - Status handles are made by the host (host->make_status) and owned by the host once returned.
 *  - Strings passed to register_kernel are copied by the host; the plugin keeps ownership.
 *  - Kernel functions may be called from any host thread, one call at a time per kernel instance
 *    unless the plugin documents otherwise; they must not keep pointers into the call after returning.
 *
 * ABI history (minor versions only append):
 *  1.0  the first ABI.
 *  1.1  appends to tessel_kernel_call: the device ordinal, the op's scalar parameters (a struct declared
 *       with the op in <tessel/ops/...>) and a workspace allocator; to tessel_kernel_def: the size of
 *       the op's parameter struct and the floating dtypes the kernel accepts; and the bf16 and f16
 *       dtypes. A plugin built against 1.0 still loads: the host reads only the fields its
 *       struct_size covers, and its kernels are never given a dtype or parameters they did not declare.
 */
#ifndef TESSEL_PLUGIN_H_
#define TESSEL_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSEL_PLUGIN_ABI_MAJOR 1
#define TESSEL_PLUGIN_ABI_MINOR 1

#if defined(__GNUC__)
#define TESSEL_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TESSEL_PLUGIN_EXPORT
#endif

/* Opaque error handle made by the host. NULL means success. */
typedef struct tessel_status tessel_status;

/* Codes match the process exit codes of the host. */
typedef enum tessel_status_code {
  TESSEL_STATUS_INTERNAL = 1,
  TESSEL_STATUS_INVALID_ARGUMENT = 2,
  TESSEL_STATUS_BAD_DATA = 3,
  TESSEL_STATUS_PLUGIN = 4
} tessel_status_code;

typedef enum tessel_dtype {
  TESSEL_DTYPE_F32 = 0,
  TESSEL_DTYPE_F64 = 1,
  TESSEL_DTYPE_I32 = 2,
  TESSEL_DTYPE_I64 = 3,
  TESSEL_DTYPE_U8 = 4,
  TESSEL_DTYPE_BF16 = 5, /* ABI 1.1: bfloat16 (the upper half of an IEEE f32) */
  TESSEL_DTYPE_F16 = 6   /* ABI 1.1: IEEE binary16 */
} tessel_dtype;

/* Bit of a dtype in tessel_kernel_def.floating_dtypes. */
#define TESSEL_DTYPE_BIT(dtype) (1u << (dtype))

typedef enum tessel_device { TESSEL_DEVICE_CPU = 0, TESSEL_DEVICE_CUDA = 1 } tessel_device;

#define TESSEL_MAX_DIMS 8

/* A dense, contiguous, row-major view. The host owns the memory. */
typedef struct tessel_tensor {
  size_t struct_size;
  int32_t dtype;  /* tessel_dtype */
  int32_t device; /* tessel_device */
  int32_t ndim;
  int64_t shape[TESSEL_MAX_DIMS];
  void* data;
} tessel_tensor;

/* Runs fn(ctx, begin, end) over chunks of [0, n) on the host's thread pool and returns when all ran.
 * fn may run on several threads at once and must not throw. A nested call (from inside fn) runs inline. */
typedef void (*tessel_range_fn)(void* ctx, int64_t begin, int64_t end);

/* ABI 1.1: scratch memory for one call, on the kernel's device (device memory for a CUDA kernel).
 * Counted against the worker's memory budget: a kernel asks here instead of calling malloc/cudaMalloc
 * for anything large. Returns NULL and sets *status when the budget or the device has no room.
 * Memory not given back with workspace_free is reclaimed when the kernel returns; on CUDA it stays
 * valid for the work the kernel queued on call->cuda_stream (the host frees it in stream order). */
typedef void* (*tessel_workspace_alloc_fn)(void* host_ctx, size_t bytes, tessel_status** status);
typedef void (*tessel_workspace_free_fn)(void* host_ctx, void* ptr);
/* One kernel invocation. Inputs are read-only unless the op documents otherwise (optim.adam.step
 * updates its inputs in place); outputs are preallocated by the host with the shapes the schema gives.
 * Every tensor lives on the kernel's device. Scalars (a learning rate, a flag) travel as 0-d or
 * 1-element tensors. */
typedef struct tessel_kernel_call {
  size_t struct_size;
  int32_t num_inputs;
  const tessel_tensor* inputs;
  int32_t num_outputs;
  tessel_tensor* outputs;
  void* cuda_stream; /* cudaStream_t for TESSEL_DEVICE_CUDA kernels, else NULL */
  /* Host services for this call. */
  void* host_ctx;
  void (*parallel_for)(void* host_ctx, int64_t n, int64_t grain, tessel_range_fn fn, void* fn_ctx);
  tessel_status* (*make_status)(void* host_ctx, int32_t code, const char* message);
  /* ABI 1.1 */
  int32_t device_ordinal; /* the CUDA device of the tensors (the current device of the calling thread); 0 on CPU */
  const void* params;     /* the op's parameter struct (host memory), or NULL when the op has none */
  size_t params_size;     /* sizeof that struct as the host was built, 0 when none */
  tessel_workspace_alloc_fn workspace_alloc;
  tessel_workspace_free_fn workspace_free;
} tessel_kernel_call;

typedef tessel_status* (*tessel_kernel_fn)(void* kernel_state, const tessel_kernel_call* call);

/* A kernel keyed by (op, device). `schema` declares the signature, checked at load time against the
 * host's expectation for that op, e.g.
 *   "rgnn.aggregate.fwd(Y:T[U,D], edge_uniq:i64[E], norm:T[E], dst_ptr:i64[N+1], dst_edges:i64[E]) -> (H:T[N,D])"
 * where T is the floating dtype of the call (f32 or f64; bf16 or f16 where the kernel's floating_dtypes
 * says so) and A is T's accumulation type (f64 when T is f64, f32 otherwise: the fp32 statistics and
 * gradients of a bf16 call; ABI 1.1). Grammar:
 *   schema := op "(" [arg {", " arg}] ") -> (" [arg {", " arg}] ")"
 *   arg    := name ":" type "[" [dim {"," dim}] "]"      type := T | A | f32 | f64 | i32 | i64 | u8
 *   dim    := SYMBOL | INTEGER | SYMBOL "+" INTEGER
 * A symbol names one size across the whole call; the host checks every call against it. */
typedef struct tessel_kernel_def {
  size_t struct_size;
  const char* op;
  int32_t device; /* tessel_device */
  const char* schema;
  tessel_kernel_fn fn;
  void* kernel_state; /* passed back to fn; owned by the plugin, valid for as long as it is loaded */
  /* ABI 1.1 */
  size_t params_size;       /* sizeof the op's parameter struct this kernel reads; 0 when the op has none.
                               The host refuses the kernel when it differs from the host's own. */
  uint32_t floating_dtypes; /* TESSEL_DTYPE_BIT()s that T may take; 0 means f32 and f64 (as in 1.0) */
} tessel_kernel_def;

typedef struct tessel_host_api {
  size_t struct_size;
  int32_t abi_major;
  int32_t abi_minor;
  const char* host_version;
  void* registry;
  /* Registers a kernel; returns NULL or an error (a duplicate (op, device), a malformed schema). */
  tessel_status* (*register_kernel)(void* registry, const tessel_kernel_def* def);
  /* Makes a status; the message is copied. Never returns NULL. */
  tessel_status* (*make_status)(void* registry, int32_t code, const char* message);
  /* level: 0 debug, 1 info, 2 warn, 3 error. */
  void (*log)(void* registry, int32_t level, const char* message);
} tessel_host_api;

/* Zeroed by the host, which sets struct_size before it calls tessel_plugin_init; the plugin fills the
 * rest. */
typedef struct tessel_plugin_info {
  size_t struct_size;
  int32_t abi_major;       /* set to TESSEL_PLUGIN_ABI_MAJOR */
  int32_t abi_minor;       /* set to TESSEL_PLUGIN_ABI_MINOR */
  const char* name;        /* static storage */
  const char* version;     /* static storage */
  const char* description; /* static storage */
} tessel_plugin_info;

typedef tessel_status* (*tessel_plugin_init_fn)(const tessel_host_api* host, tessel_plugin_info* info);

/* The entry point, declared here so that a plugin's definition is checked against it and exported
 * even under -fvisibility=hidden. The host never calls it by name: it resolves it with dlsym. */
TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host, tessel_plugin_info* info);

#define TESSEL_PLUGIN_INIT_SYMBOL "tessel_plugin_init"

#ifdef __cplusplus
}
#endif

#endif /* TESSEL_PLUGIN_H_ */

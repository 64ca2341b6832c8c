// The CUDA side of the example plugin (example_relu.cu), called from example_plugin.cc. Plain C
// functions, so the .cc needs no CUDA header: each queues its kernel on `stream` (a cudaStream_t) and
// returns null, or a static message when the launch failed.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Y = max(X, 0) over n elements; f64 selects double, else float.
const char* example_relu_fwd_cuda(const void* x, void* y, int64_t n, int f64, void* stream);
// dX = dY where Y > 0, else 0.
const char* example_relu_bwd_cuda(const void* dy, const void* y, void* dx, int64_t n, int f64, void* stream);

#ifdef __cplusplus
}
#endif

/* Feature gathers (provided by libtessel_gather.so), after PyTorch-Direct: rows of a large table read
 * in place, from mapped or pinned host memory, into a dense batch. See <tessel/ops/op.h> for the
 * declaration scheme.
 *
 * gather.rows          Y[m] = table[ids[m]] for m in [0, M): a row copy, exact for every dtype. Repeated
 *                      ids are allowed; M = 0 is a no-op. An id out of [0, N) is bad data: the call
 *                      fails with TESSEL_STATUS_BAD_DATA and a message naming the position, the id and
 *                      N ("ids[7] = 12 is out of range [0, 10)"), and Y is left unspecified.
 *
 * Where the tensors live:
 *  - CPU: table is any host memory the process can read (a mapped feature file, pinned or pageable
 *    memory); Y is written directly, with no staging copy, by the host's thread pool. Large outputs
 *    whose rows are a multiple of 64 bytes are written with non-temporal (streaming) stores.
 *  - CUDA (zero-copy): ids and Y are device memory; table's data pointer must be readable by the
 *    device. For a table in page-locked host memory (cudaHostAlloc(..., cudaHostAllocMapped) or
 *    cudaHostRegister(..., cudaHostRegisterMapped)) pass the pointer that cudaHostGetDevicePointer
 *    returns, in a tensor marked TESSEL_DEVICE_CUDA: the kernel then reads the rows across the bus
 *    with no copy of the table (device memory works too). The ids are checked on the device and the
 *    kernel waits for its stream to report a bad id, so the call returns once the gather has run.
 */
#ifndef TESSEL_OPS_GATHER_H_
#define TESSEL_OPS_GATHER_H_

#include "tessel/ops/op.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TESSEL_GATHER_OPS(X) X(gather_rows, "gather.rows", "gather.rows(table:T[N,D], ids:i64[M]) -> (Y:T[M,D])", 0, "")

TESSEL_GATHER_OPS(TESSEL_DECLARE_OP)

#ifdef __cplusplus
}
#endif

#endif /* TESSEL_OPS_GATHER_H_ */

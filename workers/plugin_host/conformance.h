// The conformance harness of `tessel plugin check`, after ggml's test-backend-ops: every kernel of a
// plugin whose op the host knows runs on fresh random inputs of several shapes against the built-in
// kernel of that op (the reference), and must
//   - match it, within a tolerance of the dtype (f64 1e-9, f32 1e-4 (5e-4 for a CUDA kernel), bf16 2e-2,
//     relative with a floor of 1);
//   - write nothing outside its outputs: every buffer, input or output, lies between guard bytes, and
//     inputs must come back unchanged (except those an op updates in place, which are compared instead);
//   - give the same bits on a second call with the same inputs;
//   - for a backward op (op.bwd*, with an op.fwd to differentiate), equal the central finite
//     difference of the forward, in f64;
// and is timed against the reference on a larger shape. Shapes: every size 1; small odd sizes; sizes
// that are no multiple of a vector width; a timing shape of about a million elements at most.
//
// Inputs are generated from the op's schema: floating tensors uniformly in [-1, 1] (a few by name: v,
// rstd, norm, seg_norm positive; w away from 0), integer tensors by the op's recipe (an index in range, a
// CSR pointer, a permutation, a mask). A backward op's inputs that its forward computes (Y, mean, rstd,
// lse) are computed by the reference forward, as a training step would. An op without a recipe for one
// of its integer inputs (the fused RGNN kernels, whose segment layout has invariants of its own) is
// listed as not covered, not passed.
//
// CUDA kernels are run where a GPU is visible (inputs copied to the device between guard bytes, compared
// with the CPU reference); elsewhere each gets one row saying it was skipped and why.
//
// Thread safety: none needed; runs on the calling thread with a pool of its own.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/status.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::workers {

struct ConformanceOptions {
  uint64_t seed = 20261126;
  int threads = 2;      // the pool both kernels get (the same for both, so their times compare)
  int timing_runs = 5;  // the median of this many calls is reported; 0: no timing
  // Where the reference plugins are (their libtessel_*.so); empty: the first of DefaultPluginDirs().
  std::vector<std::string> reference_dirs;
};

struct ConformanceSummary {
  int passed = 0;
  int failed = 0;
  int skipped = 0;  // CUDA without a GPU, or no recipe
};

// Checks every kernel of the plugin loaded from `plugin_path` into `candidate` whose op the host knows,
// against `reference` (the built-in plugins). Prints a table to `out`, one row per (op, device, dtype),
// and returns the counts; a failure is in the table, never an error of the call. Ops the reference does
// not serve are compared with nothing and get only the guard, determinism and gradient checks.
ConformanceSummary CheckConformance(const KernelRegistry& candidate, const std::string& plugin_path,
                                    const KernelRegistry& reference, std::ostream& out,
                                    const ConformanceOptions& options = {});

}  // namespace tessel::workers

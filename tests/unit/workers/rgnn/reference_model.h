// The naive double-precision reference of one RGNN training epoch (RGCN, RGAT, HGT), exactly as
// workers/rgnn/MODELS.md specifies them. It exists to check Tessel's real trainer, which computes the same
// thing with fused float kernels, on small graphs (tens of nodes). It is written to be obviously correct,
// not fast: dense std::vector<double> matrices, plain loops over edges, a hand-written backward, and no
// code shared with Tessel (only the C++ standard library).
//
// Parameters are named as in MODELS.md ("layer0.weight", "layer1.att_src", "classifier.weight", ...).
// Every tensor is row-major with the shape MODELS.md gives.
//
// Ownership: every function takes its inputs by const reference and returns values; nothing is retained.
// Thread safety: the functions are pure; any thread may call them concurrently.
// Failure: a malformed graph, config or parameter set (a missing name, a wrong size, an indivisible width,
// a block decomposition that no layer qualifies for) throws std::invalid_argument.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/workers/rgnn/reference_types.h"

namespace tessel::testing {

// Every parameter of the model, zero-filled, with its MODELS.md name and shape. HGT's "layer{l}.skip"
// exists only on the layers where K == D (where it is used).
RefParams RefParamShapes(const RefGraph& graph, const RefConfig& config);

// Every parameter uniform in (-0.5, 0.5) from `seed` (rel_prior and skip included), for self-tests.
// The stream is a fixed SplitMix64, so the values are the same on every platform.
RefParams RefRandomParams(const RefGraph& graph, const RefConfig& config, uint64_t seed);

// The logits [N * C] of the forward pass.
std::vector<double> RefForward(const RefGraph& graph, const RefConfig& config, const RefParams& params);

// The forward pass and the mean cross-entropy over the labelled train nodes (0 when there are none).
double RefLoss(const RefGraph& graph, const RefConfig& config, const RefParams& params);

struct RefStep {
  double loss = 0;      // of the forward pass with the incoming params
  int64_t correct = 0;  // labelled train nodes whose first-maximum argmax equals the label
  int64_t count = 0;    // labelled train nodes
  RefParams grads;      // d loss / d param, without the L2 term
  RefParams params;     // after the Adam step
  RefParams m, v;       // Adam moments after the step
};

// One epoch from `params`, with Adam state m and v (an empty map, or a missing name, means zeros, as on
// the first step) at 1-based step `step`: forward, loss, backward and one Adam step.
RefStep RefTrainStep(const RefGraph& graph, const RefConfig& config, const RefParams& params, const RefParams& m,
                     const RefParams& v, int64_t step);

// One torch.optim.Adam step (betas 0.9 / 0.999, eps 1e-8) on every entry of `grads`, in place on params,
// m and v (missing m / v names start at zero). The penalty l2 * sum(p^2) on the names that start with
// "layer0." and on no others (MODELS.md "Objective and optimiser"): g += 2 * l2 * p.
void RefAdamStep(const RefParams& grads, int64_t step, double lr, double l2, RefParams* params, RefParams* m,
                 RefParams* v);

}  // namespace tessel::testing

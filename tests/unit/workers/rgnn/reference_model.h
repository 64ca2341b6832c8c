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
#include <map>
#include <string>
#include <vector>

namespace tessel::testing {

// An edge (src -> dst) of relation rel.
struct RefEdge {
  int64_t src = 0;
  int64_t dst = 0;
  int32_t rel = 0;
};

struct RefGraph {
  int64_t num_nodes = 0;
  int32_t num_types = 1;
  std::vector<int32_t> node_type;  // [N]; empty = every node is of type 0
  int32_t num_relations = 0;
  std::vector<RefEdge> edges;  // parallel edges count separately (also in |N_r(i)|)
  int64_t feature_dim = 0;
  std::vector<double> features;  // [N * F]; empty = one-hot input (X0 = I_N, d_0 = N)
  int32_t num_classes = 0;
  std::vector<int64_t> labels;      // [N]; -1 = unlabelled
  std::vector<uint8_t> train_mask;  // [N]; empty = every node is a train node
};

enum class RefModel { kRgcn, kRgat, kHgt };
enum class RefHeadMerge { kConcat, kMean };

struct RefConfig {
  RefModel model = RefModel::kRgcn;
  int32_t layers = 2;
  int32_t hidden = 8;
  int32_t heads = 1;                                // RGAT and HGT
  RefHeadMerge head_merge = RefHeadMerge::kConcat;  // RGAT hidden layers (the last one always averages)
  int32_t num_bases = 0;                            // RGCN only; 0 = off
  int32_t num_blocks = 0;                           // RGCN only; 0 = off
  double lr = 0.01;
  double l2 = 5e-4;  // coupled weight decay on the parameters of layer 0
};

struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major, product(shape) values
};

using RefParams = std::map<std::string, RefTensor>;

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
// m and v (missing m / v names start at zero). Coupled L2: g += l2 * p for names that start with
// "layer0." and for no others.
void RefAdamStep(const RefParams& grads, int64_t step, double lr, double l2, RefParams* params, RefParams* m,
                 RefParams* v);

}  // namespace tessel::testing

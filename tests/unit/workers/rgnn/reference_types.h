// The values of the RGNN reference (reference_model.h): its graph, config and parameters. Apart, so that
// the reference's internals (reference_internal.h) and its entry points share them without including each
// other. Ownership: values. Thread safety: values.
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
  bool bias = false;                                // HGT only: per-type biases on K, Q, V and out
  double lr = 0.01;
  double l2 = 5e-4;  // the penalty l2 * sum(p^2) on the parameters of layer 0
};

struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major, product(shape) values
};

using RefParams = std::map<std::string, RefTensor>;

}  // namespace tessel::testing

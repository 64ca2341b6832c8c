// `tessel generate graph`: a synthetic heterogeneous graph whose labels are learnable only from
// relation-typed neighbourhoods.
//
// Planted structure:
//   - Nodes are split evenly over `node_types` types ("type0", "type1", ...). Every node of every type
//     has a latent class, uniform over `classes`; it is its label, and every node is labelled. The
//     train/val/test masks pick disjoint random subsets of given fractions, on every type.
//   - Base relation r ("rel<r>") goes from type r % T to type (r + 1 + r / T) % T and carries a
//     random permutation pi_r of the classes (never the identity when classes > 1). Each of its edges
//     picks a uniform source u; with probability `planted_fraction` the destination is uniform among
//     the destination type's nodes of class pi_r(class(u)), otherwise uniform over the whole type.
//     So a fraction p + (1 - p) / C of the edges satisfy class(dst) == pi_r(class(src)).
//   - Features: each class has a random mean vector (unit-variance entries); a node's features are its
//     class mean plus Gaussian noise of std feature_noise * sqrt(feature_dim / 2) per dimension. Two
//     class means then lie about 2 / feature_noise noise-stds apart along the line joining them, so
//     a node's own features classify it poorly at every feature_dim, while aggregating neighbours per
//     relation (and undoing pi_r) sharpens the evidence; mixing relations blurs it, because their
//     permutations differ. With the defaults, on the test split: own features about 47% accuracy,
//     own + relation-blind neighbour mean about 48%, own + one hop of relation-typed neighbours about
//     82% (nearest-class-mean classifiers; see tests/unit/storage/generator_test.cc). Chance is 25%.
//   - Base edges total nodes * avg_degree / 2 (the average base degree, in + out, is avg_degree),
//     split evenly over the relations; duplicate edges are dropped and edges sorted by (src, dst).
//   - Then, unless disabled, an inverse "rel<r>^-1" per base relation and a self-loop relation per node
//     type ("self_loop", or "self_loop:<type>" with several types).
// Everything is a deterministic function of the options (xoshiro256** seeded via splitmix64).
//
// Thread safety: plain function. Failure: out-of-range options are kUsage; nothing else fails.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "storage/graph.h"

namespace tessel::storage {

struct GenerateOptions {
  int64_t nodes = 20000;
  int32_t node_types = 3;
  int32_t relations = 6;  // base relations
  int32_t classes = 4;
  double avg_degree = 8.0;
  int64_t feature_dim = 32;  // 0 = featureless
  double planted_fraction = 0.9;
  double feature_noise = 1.75;
  double train_fraction = 0.1;
  double val_fraction = 0.1;
  double test_fraction = 0.2;
  uint64_t seed = 1;
  bool add_inverse = true;
  bool add_self_loop = true;
  std::string name = "synthetic";
};

// Checks the options (kUsage naming the bad one) without generating anything.
Status ValidateGenerateOptions(const GenerateOptions& options);

Result<HeteroGraph> GenerateGraph(const GenerateOptions& options);

}  // namespace tessel::storage

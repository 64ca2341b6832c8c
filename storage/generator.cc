#include "storage/generator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "core/process_memory.h"
#include "storage/edges_import.h"
#include "storage/generator_rng.h"

namespace tessel::storage {
namespace {

Relation MakeEdges(const GenerateOptions& o, const HeteroGraph& g, int32_t r, int64_t num_edges,
                   const std::vector<int32_t>& perm, const std::vector<std::vector<std::vector<int64_t>>>& by_class,
                   Rng& rng) {
  Relation rel;
  rel.name = StrCat("rel", r);
  rel.kind = RelationKind::kBase;
  const int32_t t = o.node_types;
  rel.src_type = r % t;
  rel.dst_type = (r + 1 + r / t) % t;
  const NodeType& src = g.node_types[rel.src_type];
  const NodeType& dst = g.node_types[rel.dst_type];
  std::vector<std::pair<int64_t, int64_t>> edges(static_cast<size_t>(num_edges));
  for (auto& e : edges) {
    const int64_t u = rng.Below(src.count);
    int64_t v;
    const auto& pool = by_class[rel.dst_type][perm[src.labels[u]]];
    if (rng.Uniform() < o.planted_fraction && !pool.empty()) {
      v = pool[rng.Below(static_cast<int64_t>(pool.size()))];
    } else {
      v = rng.Below(dst.count);
    }
    e = {u, v};
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  rel.src.reserve(edges.size());
  rel.dst.reserve(edges.size());
  for (const auto& [u, v] : edges) {
    rel.src.push_back(u);
    rel.dst.push_back(v);
  }
  return rel;
}

std::string Fingerprint(const GenerateOptions& o) {
  return StrCat("tessel-generate v1; nodes=", o.nodes, "; node_types=", o.node_types, "; relations=", o.relations,
                "; classes=", o.classes, "; avg_degree=", o.avg_degree, "; feature_dim=", o.feature_dim,
                "; planted_fraction=", o.planted_fraction, "; feature_noise=", o.feature_noise,
                "; train=", o.train_fraction, "; val=", o.val_fraction, "; test=", o.test_fraction, "; seed=", o.seed,
                "; inverse=", o.add_inverse ? 1 : 0, "; self_loop=", o.add_self_loop ? 1 : 0, "; name=", o.name);
}

}  // namespace

Status ValidateGenerateOptions(const GenerateOptions& o) {
  auto bad = [](std::string_view what) { return UsageError(StrCat("generate graph: ", what)); };
  if (o.node_types < 1) return bad("--node-types must be at least 1");
  if (o.nodes < o.node_types) return bad("--nodes must be at least --node-types");
  if (o.nodes > (int64_t{1} << 40)) return bad("--nodes is too large");
  if (o.relations < 1) return bad("--relations must be at least 1");
  if (o.classes < 1 || o.classes > 1000000) return bad("--classes must be in [1, 1000000]");
  if (!(o.avg_degree >= 0) || o.avg_degree * static_cast<double>(o.nodes) > 1e11) {
    return bad("--avg-degree must be non-negative and give at most 5e10 edges");
  }
  if (o.feature_dim < 0 || o.feature_dim > 1000000) return bad("--feature-dim must be in [0, 1000000]");
  if (!(o.planted_fraction >= 0 && o.planted_fraction <= 1)) return bad("--planted-fraction must be in [0, 1]");
  if (!(o.feature_noise >= 0) || !std::isfinite(o.feature_noise)) return bad("--feature-noise must be >= 0");
  for (double f : {o.train_fraction, o.val_fraction, o.test_fraction}) {
    if (!(f >= 0 && f <= 1)) return bad("split fractions must be in [0, 1]");
  }
  if (o.train_fraction + o.val_fraction + o.test_fraction > 1 + 1e-9) {
    return bad("--train-fraction + --val-fraction + --test-fraction exceeds 1");
  }
  if (o.name.empty()) return bad("--name must not be empty");
  return Status::Ok();
}

Result<HeteroGraph> GenerateGraph(const GenerateOptions& o) {
  TESSEL_RETURN_IF_ERROR(ValidateGenerateOptions(o));
  // The finished graph's own arrays, counted in double, against the memory this process may have: the
  // generation is refused before it starts (Linux would grant the memory and its OOM killer end the
  // process, SIGKILL and no message). Per node a label, the planted-class index and three masks, and the
  // features; 16 bytes an edge, twice with the inverses, and a self loop per node.
  const double nodes = static_cast<double>(o.nodes), base_edges = nodes * o.avg_degree / 2.0;
  const double need = nodes * (8 + 8 + 3 + 4.0 * static_cast<double>(o.feature_dim)) +
                      16.0 * base_edges * (o.add_inverse ? 2 : 1) + (o.add_self_loop ? 16.0 * nodes : 0.0);
  if (const int64_t host = HostMemoryBytes(); host > 0 && need > static_cast<double>(host)) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "at least %.3g GB (%.3g nodes with %d float32 features, %.3g edges), more than the %.3g GB",
                  need * 1e-9, nodes, static_cast<int>(o.feature_dim), base_edges * (o.add_inverse ? 2 : 1),
                  static_cast<double>(host) * 1e-9);
    return StorageError(StrCat("out of memory: generating graph '", o.name, "' needs ", text,
                               " this process may have; lower nodes, avg_degree or feature_dim (data.synthetic.* in a "
                               "job file; --nodes, --avg-degree, --feature-dim of tessel data generate)"));
  }
  HeteroGraph g;
  g.name = o.name;
  g.num_classes = o.classes;
  g.source_fingerprint = Fingerprint(o);
  for (int32_t c = 0; c < o.classes; ++c) g.class_names.push_back(StrCat("class", c));

  // Latent classes, and per type the nodes of each class (the planted destinations).
  Rng class_rng(o.seed, kClasses);
  std::vector<std::vector<std::vector<int64_t>>> by_class(static_cast<size_t>(o.node_types));
  for (int32_t t = 0; t < o.node_types; ++t) {
    NodeType& type = g.node_types.emplace_back();
    type.name = StrCat("type", t);
    type.count = o.nodes / o.node_types + (t < o.nodes % o.node_types ? 1 : 0);
    type.labels.resize(static_cast<size_t>(type.count));
    by_class[t].resize(static_cast<size_t>(o.classes));
    for (int64_t i = 0; i < type.count; ++i) {
      type.labels[i] = class_rng.Below(o.classes);
      by_class[t][type.labels[i]].push_back(i);
    }
  }

  // Features: class mean + noise.
  if (o.feature_dim > 0) {
    const auto dim = static_cast<size_t>(o.feature_dim);
    std::vector<float> means(static_cast<size_t>(o.classes) * dim);
    Rng mean_rng(o.seed, kMeans);
    FillNormal(mean_rng, 1.0, means.data(), means.size());
    const double noise = o.feature_noise * std::sqrt(static_cast<double>(o.feature_dim) / 2.0);
    Rng feature_rng(o.seed, kFeatures);
    for (auto& type : g.node_types) {
      type.feature_dim = o.feature_dim;
      type.features.resize(static_cast<size_t>(type.count) * dim);
      FillNormal(feature_rng, noise, type.features.data(), type.features.size());
      for (int64_t i = 0; i < type.count; ++i) {
        const float* mean = means.data() + static_cast<size_t>(type.labels[i]) * dim;
        float* row = type.features.data() + static_cast<size_t>(i) * dim;
        for (size_t k = 0; k < dim; ++k) row[k] += mean[k];
      }
    }
  }

  // Splits.
  Rng split_rng(o.seed, kSplits);
  for (auto& type : g.node_types) {
    const auto n = static_cast<size_t>(type.count);
    type.train_mask.assign(n, 0);
    type.val_mask.assign(n, 0);
    type.test_mask.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const double u = split_rng.Uniform();
      if (u < o.train_fraction) {
        type.train_mask[i] = 1;
      } else if (u < o.train_fraction + o.val_fraction) {
        type.val_mask[i] = 1;
      } else if (u < o.train_fraction + o.val_fraction + o.test_fraction) {
        type.test_mask[i] = 1;
      }
    }
  }

  // Base relations.
  Rng perm_rng(o.seed, kPermutations);
  const auto total_edges = static_cast<int64_t>(std::llround(static_cast<double>(o.nodes) * o.avg_degree / 2.0));
  for (int32_t r = 0; r < o.relations; ++r) {
    const std::vector<int32_t> perm = RandomPermutation(perm_rng, o.classes);
    Rng edge_rng(o.seed, kEdges + static_cast<uint64_t>(r));
    const int64_t num_edges = total_edges / o.relations + (r < total_edges % o.relations ? 1 : 0);
    g.relations.push_back(MakeEdges(o, g, r, num_edges, perm, by_class, edge_rng));
  }
  AddDerivedRelations(g, o.add_inverse, o.add_self_loop);
  return g;
}

}  // namespace tessel::storage

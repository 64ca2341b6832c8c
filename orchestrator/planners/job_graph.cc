#include "orchestrator/planners/job_graph.h"

#include <sys/stat.h>

#include <filesystem>

#include "storage/edges_import.h"
#include "storage/generator.h"
#include "storage/rdf_import.h"

namespace tessel::orchestrator {

namespace {

std::string FileFacts(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return path + "(missing)";
  return StrCat(path, "(", st.st_size, ",", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ")");
}

Result<storage::HeteroGraph> BuildGraph(const jobs::JobSpec& spec) {
  const jobs::DataSection& d = spec.data;
  switch (d.format) {
    case jobs::DataFormat::kRdf: {
      storage::RdfImportOptions o;
      o.triples = d.triples;
      o.train_labels = d.train_labels;
      o.test_labels = d.test_labels;
      return storage::ImportRdf(o);
    }
    case jobs::DataFormat::kEdges: {
      storage::EdgesImportOptions o;
      o.inputs = d.edges;
      o.add_inverse = d.add_inverse;
      o.add_self_loop = d.add_self_loop;
      return storage::ImportEdges(o);
    }
    case jobs::DataFormat::kSynthetic: {
      const jobs::SyntheticSection& s = d.synthetic;
      storage::GenerateOptions o;
      o.nodes = s.nodes;
      o.node_types = s.node_types;
      o.relations = s.relations;
      o.classes = s.classes;
      o.avg_degree = s.avg_degree;
      o.feature_dim = s.feature_dim;
      o.train_fraction = s.train_fraction;
      o.test_fraction = s.test_fraction;
      o.seed = s.seed;
      o.add_inverse = d.add_inverse;
      o.add_self_loop = d.add_self_loop;
      return storage::GenerateGraph(o);
    }
    case jobs::DataFormat::kText:
    case jobs::DataFormat::kLlmc:
    case jobs::DataFormat::kGeneratedText:
      return UsageError(StrCat("data.format = \"", NameOf(d.format), "\" holds tokens, not a graph"));
    case jobs::DataFormat::kPartitions:
      // The graph planner reads partition.json instead; no rank loads the whole graph.
      return InternalError("data.format = \"partitions\" has no whole graph to load");
    case jobs::DataFormat::kGraph:
      break;
  }
  return storage::ReadGraph(d.graph);
}

}  // namespace

std::string DataFingerprint(const jobs::JobSpec& spec) {
  const jobs::DataSection& d = spec.data;
  std::string f =
      StrCat("tessel-data-v1 format=", NameOf(d.format), " inverse=", d.add_inverse, " self_loop=", d.add_self_loop);
  switch (d.format) {
    case jobs::DataFormat::kRdf:
      f += " triples=" + FileFacts(d.triples) + " train=" + FileFacts(d.train_labels) +
           " test=" + FileFacts(d.test_labels);
      break;
    case jobs::DataFormat::kEdges:
      for (const auto& e : d.edges) f += " edges=" + FileFacts(e);
      break;
    case jobs::DataFormat::kSynthetic: {
      const jobs::SyntheticSection& s = d.synthetic;
      f += StrCat(" nodes=", s.nodes, " types=", s.node_types, " relations=", s.relations, " classes=", s.classes,
                  " degree=", s.avg_degree, " features=", s.feature_dim, " train=", s.train_fraction,
                  " test=", s.test_fraction, " seed=", s.seed);
      break;
    }
    case jobs::DataFormat::kGraph:
      f += " graph=" + FileFacts(d.graph);
      break;
    case jobs::DataFormat::kPartitions:  // nothing is imported or cached: the workers read the parts
    case jobs::DataFormat::kText:
    case jobs::DataFormat::kLlmc:
    case jobs::DataFormat::kGeneratedText:
      break;
  }
  return f;
}

Result<storage::HeteroGraph> LoadJobGraph(const jobs::JobSpec& spec, const Logger& log) {
  const jobs::DataSection& d = spec.data;
  if (d.format == jobs::DataFormat::kGraph) return storage::ReadGraph(d.graph);

  const std::string fingerprint = DataFingerprint(spec);
  std::error_code ec;
  if (!d.graph.empty() && std::filesystem::exists(d.graph, ec)) {
    auto cached = storage::ReadGraph(d.graph);
    if (cached.ok() && cached->source_fingerprint == fingerprint) {
      log.Info("using the cached graph " + d.graph);
      return cached;
    }
    log.Info(cached.ok()
                 ? "the cached graph " + d.graph + " is stale: rebuilding it"
                 : "the cached graph " + d.graph + " is unreadable (" + cached.status().message() + "): rebuilding it");
  }
  log.Info(StrCat(d.format == jobs::DataFormat::kSynthetic ? "generating" : "importing", " the ", NameOf(d.format),
                  " data"));
  TESSEL_ASSIGN_OR_RETURN(storage::HeteroGraph graph, BuildGraph(spec));
  graph.source_fingerprint = fingerprint;
  if (!d.graph.empty()) {
    const auto parent = std::filesystem::path(d.graph).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    Status written = storage::WriteGraph(graph, d.graph);
    if (written.ok()) {
      log.Info("cached the graph at " + d.graph);
    } else {
      log.Warn("could not cache the graph (" + written.message() + "); continuing without a cache");
    }
  }
  return graph;
}

}  // namespace tessel::orchestrator

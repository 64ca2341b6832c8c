// `tessel import rdf|edges|chunked`, `tessel generate graph` and `tessel inspect`: thin CLI11 wrappers over
// storage/{rdf_import,edges_import,chunked_import,generator,inspect}.h. Each builds the graph in memory and writes
// it only when everything succeeded (WriteGraph goes through a temporary name), so a failure leaves
// no output file.
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "core/logging.h"
#include "core/safe_file.h"
#include "orchestrator/cli.h"
#include "orchestrator/partitioning/rank_group.h"
#include "orchestrator/partitioning/rank_output.h"
#include "storage/chunked_generator.h"
#include "storage/chunked_import.h"
#include "storage/edges_import.h"
#include "storage/generator.h"
#include "storage/graph.h"
#include "storage/inspect.h"
#include "storage/rdf_import.h"
#include "workers/comm/mpi_comm.h"

namespace tessel::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Writes `graph` to `out_path` and prints its summary with the elapsed time since `start`.
Status WriteAndReport(Result<storage::HeteroGraph> graph, const std::string& out_path, Clock::time_point start,
                      std::ostream& out) {
  if (!graph.ok()) return graph.status();
  const double built = std::chrono::duration<double>(Clock::now() - start).count();
  TESSEL_RETURN_IF_ERROR(storage::WriteGraph(*graph, out_path));
  const double total = std::chrono::duration<double>(Clock::now() - start).count();
  struct stat st;
  const int64_t bytes = ::stat(out_path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  out << "wrote " << out_path << " (" << storage::WithThousands(bytes) << " bytes) in " << std::fixed
      << std::setprecision(2) << total << " s (" << built << " s building)\n"
      << std::defaultfloat;
  storage::PrintGraphSummary(*graph, storage::InspectOptions{}, out);
  return Status::Ok();
}

void RegisterImportRdf(CLI::App& import, Status* result) {
  auto opts = std::make_shared<storage::RdfImportOptions>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = import.add_subcommand("rdf", "Import an N-Triples file (.nt or .nt.gz) with optional label TSVs");
  cmd->add_option("--triples", opts->triples, "N-Triples file, plain or compressed (gzip, bzip2, xz, zstd)")
      ->required();
  cmd->add_option("--train-labels", opts->train_labels, "TSV with a header: entity column, label column");
  cmd->add_option("--val-labels", opts->val_labels, "TSV of validation labels (same format)");
  cmd->add_option("--test-labels", opts->test_labels, "TSV of test labels (same format)");
  cmd->add_option("--entity-column", opts->entity_column, "Header name of the entity column (default: first)");
  cmd->add_option("--label-column", opts->label_column, "Header name of the label column (default: last)");
  cmd->add_option("--out", *out, "Graph file to write (.h5)")->required();
  cmd->add_option("--name", opts->name, "Graph name (default: the triples file name without extensions)");
  cmd->callback([opts, out, result] {
    const auto start = Clock::now();
    *result = WriteAndReport(storage::ImportRdf(*opts), *out, start, std::cout);
  });
}

void RegisterImportEdges(CLI::App& import, Status* result) {
  auto opts = std::make_shared<storage::EdgesImportOptions>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = import.add_subcommand(
      "edges", "Import head<TAB>relation<TAB>tail edge lists (plain, compressed, or a tar(.gz) of .txt/.tsv members)");
  cmd->add_option("--input", opts->inputs, "Edge-list file or archive (repeatable)")->required();
  cmd->add_option("--member", opts->members, "Archive member to read (repeatable; default: every .txt/.tsv)");
  cmd->add_flag("--add-inverse", opts->add_inverse, "Add an inverse relation R^-1 per relation");
  cmd->add_flag("--add-self-loop", opts->add_self_loop, "Add one self-loop relation over all nodes");
  cmd->add_option("--out", *out, "Graph file to write (.h5)")->required();
  cmd->add_option("--name", opts->name, "Graph name (default: the first input's name without extensions)");
  cmd->callback([opts, out, result] {
    const auto start = Clock::now();
    *result = WriteAndReport(storage::ImportEdges(*opts), *out, start, std::cout);
  });
}

}  // namespace

void AddChunkedReadOptions(CLI::App* cmd, storage::ChunkedImportOptions* opts) {
  cmd->add_option("--features", opts->features, "node_data key read as node features")->capture_default_str();
  cmd->add_option("--labels", opts->labels, "node_data key read as class labels (-1 = unlabelled)")
      ->capture_default_str();
  cmd->add_option("--train-mask", opts->train_mask, "node_data key of the training mask")->capture_default_str();
  cmd->add_option("--val-mask", opts->val_mask, "node_data key of the validation mask")->capture_default_str();
  cmd->add_option("--test-mask", opts->test_mask, "node_data key of the test mask")->capture_default_str();
  cmd->add_flag("--add-inverse", opts->add_inverse, "Add an inverse relation R^-1 per edge type");
  cmd->add_flag("--add-self-loop", opts->add_self_loop, "Add a self-loop relation per node type");
  cmd->add_option("--name", opts->name, "Graph name (default: metadata.json's graph_name)");
}

namespace {

void RegisterImportChunked(CLI::App& import, Status* result) {
  auto opts = std::make_shared<storage::ChunkedImportOptions>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = import.add_subcommand(
      "chunked", "Import a graph in DGL's chunked graph format (a directory with metadata.json, CSV and .npy chunks)");
  cmd->add_option("DIR", opts->dir, "The directory that holds metadata.json")->required();
  AddChunkedReadOptions(cmd, opts.get());
  cmd->add_option("--out", *out, "Graph file to write (.h5)")->required();
  cmd->callback([opts, out, result] {
    const auto start = Clock::now();
    Result<storage::ChunkedImport> imported = storage::ImportChunked(*opts);
    if (!imported.ok()) {
      *result = imported.status();
      return;
    }
    for (const std::string& what : imported->ignored) {
      std::cout << "note: " << what << " is not read (Tessel trains on node features, labels and masks only)\n";
    }
    *result = WriteAndReport(std::move(imported->graph), *out, start, std::cout);
  });
}

// `mpirun -np P tessel generate graph --chunked --out DIR`: rank k writes chunk k of every array, rank 0
// metadata.json; the directory appears whole or not at all. An existing DIR is refused unless empty.
Status GenerateChunkedOnRanks(const orchestrator::RankGroup& group, const storage::GenerateOptions& o,
                              const std::filesystem::path& out, Clock::time_point start, std::ostream& os) {
  std::error_code ec;
  const bool taken =
      std::filesystem::exists(std::filesystem::symlink_status(out, ec)) &&
      !(std::filesystem::is_directory(std::filesystem::symlink_status(out, ec)) && std::filesystem::is_empty(out, ec));
  TESSEL_RETURN_IF_ERROR(group.Agree(
      group.rank() == 0 && taken
          ? UsageError(StrCat("--out ", out.string(), " exists and is not an empty directory; choose another"))
          : storage::ValidateGenerateOptions(o)));
  TESSEL_RETURN_IF_ERROR(orchestrator::WriteDirectoryOnRanks(
      group, out,
      [&](const std::filesystem::path& tmp) {
        return storage::WriteChunkedShare(o, tmp.string(), group.rank(), group.size());
      },
      [&](const std::filesystem::path& tmp) {
        TESSEL_RETURN_IF_ERROR(
            WriteFileAtomically(tmp / "metadata.json", storage::ChunkedGraphMetadata(o, group.size())));
        std::error_code rename_ec;
        std::filesystem::remove(out, rename_ec);  // an empty directory, or nothing
        std::filesystem::rename(tmp, out, rename_ec);
        if (rename_ec)
          return StorageError(StrCat("cannot rename ", tmp.string(), " to ", out.string(), ": ", rename_ec.message()));
        return Status::Ok();
      }));
  if (group.rank() == 0) {
    const double total = std::chrono::duration<double>(Clock::now() - start).count();
    const auto edges = static_cast<int64_t>(std::llround(static_cast<double>(o.nodes) * o.avg_degree / 2.0));
    os << "wrote " << out.string() << " (DGL's chunked format, " << group.size() << " chunks per array) in "
       << std::fixed << std::setprecision(2) << total << " s: " << storage::WithThousands(o.nodes) << " nodes in "
       << o.node_types << " types, " << storage::WithThousands(edges) << " edges in " << o.relations << " relations, "
       << o.classes << " classes, features " << o.feature_dim << std::defaultfloat << "\n"
       << "note: no inverse or self-loop relations are written; add them with --add-inverse --add-self-loop "
          "(tessel import chunked, tessel partition --input)\n";
  }
  return Status::Ok();
}

Status GenerateChunked(const storage::GenerateOptions& o, const std::string& out, Clock::time_point start,
                       std::ostream& os) {
  TESSEL_ASSIGN_OR_RETURN(auto session, workers::MpiSession::Init(nullptr, nullptr));
  TESSEL_ASSIGN_OR_RETURN(const orchestrator::RankGroup group, orchestrator::RankGroup::World());
  return group.PrintedOnce(GenerateChunkedOnRanks(group, o, std::filesystem::path(out).lexically_normal(), start, os));
}

void RegisterGenerateGraph(CLI::App& generate, Status* result) {
  auto opts = std::make_shared<storage::GenerateOptions>();
  auto out = std::make_shared<std::string>();
  auto no_inverse = std::make_shared<bool>(false);
  auto no_self_loop = std::make_shared<bool>(false);
  CLI::App* cmd = generate.add_subcommand(
      "graph", "Generate a synthetic heterogeneous graph whose labels need relation-typed neighbourhoods");
  cmd->add_option("--out", *out, "Graph file to write (.h5)")->required();
  cmd->add_option("--nodes", opts->nodes, "Number of nodes over all types")->capture_default_str();
  cmd->add_option("--node-types", opts->node_types, "Number of node types")->capture_default_str();
  cmd->add_option("--relations", opts->relations, "Number of base relations")->capture_default_str();
  cmd->add_option("--classes", opts->classes, "Number of classes")->capture_default_str();
  cmd->add_option("--avg-degree", opts->avg_degree, "Average base degree (in + out) per node")->capture_default_str();
  cmd->add_option("--feature-dim", opts->feature_dim, "Feature width (0 = featureless)")->capture_default_str();
  cmd->add_option("--planted-fraction", opts->planted_fraction,
                  "Probability that an edge follows its relation's class permutation")
      ->capture_default_str();
  cmd->add_option("--feature-noise", opts->feature_noise, "Feature noise; class means are 2/noise noise-stds apart")
      ->capture_default_str();
  cmd->add_option("--train-fraction", opts->train_fraction, "Fraction of nodes in the train split")
      ->capture_default_str();
  cmd->add_option("--val-fraction", opts->val_fraction, "Fraction of nodes in the validation split")
      ->capture_default_str();
  cmd->add_option("--test-fraction", opts->test_fraction, "Fraction of nodes in the test split")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Random seed; the graph is a deterministic function of the options")
      ->capture_default_str();
  cmd->add_option("--name", opts->name, "Graph name")->capture_default_str();
  cmd->add_flag("--no-inverse", *no_inverse, "Do not add inverse relations");
  cmd->add_flag("--no-self-loop", *no_self_loop, "Do not add self-loop relations");
  auto chunked = std::make_shared<bool>(false);
  cmd->add_flag("--chunked", *chunked,
                "Write DGL's chunked graph format into the directory --out, each rank of an mpirun its own chunks "
                "(no derived relations: add them when importing or partitioning)");
  cmd->callback([opts, out, no_inverse, no_self_loop, chunked, result] {
    opts->add_inverse = !*no_inverse;
    opts->add_self_loop = !*no_self_loop;
    const auto start = Clock::now();
    *result = *chunked ? GenerateChunked(*opts, *out, start, std::cout)
                       : WriteAndReport(storage::GenerateGraph(*opts), *out, start, std::cout);
  });
}

void RegisterInspect(CLI::App& app, Status* result) {
  auto path = std::make_shared<std::string>();
  auto all = std::make_shared<bool>(false);
  auto tree = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("inspect", "Summarise a graph file, or dump the tree of any HDF5 file");
  cmd->add_option("FILE", *path, "HDF5 file")->required();
  cmd->add_flag("--all", *all, "List every relation");
  cmd->add_flag("--tree", *tree,
                "Dump the object tree (datasets with type, shape, layout and byte offset) of a graph file too");
  cmd->callback([path, all, tree, result] {
    storage::InspectOptions options;
    if (*all) options.max_relations = -1;
    if (*tree) options.view = storage::InspectView::kTree;
    *result = storage::InspectFile(*path, options, std::cout);
  });
}

}  // namespace

void RegisterDataCommands(CLI::App& app, Status* result) {
  CLI::App* import = app.add_subcommand("import", "Import a dataset into a graph file");
  import->require_subcommand(1);
  RegisterImportRdf(*import, result);
  RegisterImportEdges(*import, result);
  RegisterImportChunked(*import, result);
  CLI::App* generate = app.add_subcommand("generate", "Generate synthetic data");
  generate->require_subcommand(1);
  RegisterGenerateGraph(*generate, result);
  RegisterInspect(app, result);
}

}  // namespace tessel::cli

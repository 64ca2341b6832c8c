// tessel-bench-graph: the `graph` family of bench/run.sh (bench/graph/README.md). It times the two
// in-process graph builders that the unit tests only check for correctness, each against a floor measured
// in the same run:
//   - aifb_import: storage::ImportRdf on AIFB (../shared/data/aifb: the .nt.gz and the two label files),
//     against gunzip_seconds: reading and decompressing the same .nt.gz with zlib, which any importer of
//     that file must do; target 2 s (the bound storage_test asserted until the timings moved here);
//   - generate_1m: storage::GenerateGraph with 1M nodes, average degree 20 and 16 features (the options of
//     storage_test's Generator.ScalesToAMillionNodes), against fill_seconds: allocating and writing as
//     many bytes as the generated graph holds (edge ids, features, labels, masks) in fresh memory;
//     target 60 s (the bound that test asserted).
// Both builders run on one thread, and so do their floors. Repetitions alternate floor and builder, so a
// change in the machine's load falls on both; medians are reported.
//
// Usage: tessel-bench-graph [--quick] [--reps N] [--data-dir DIR] [--wait-idle S] [--json FILE]
//                           [--commit ID]
// Exit 0 when every measurement ran, 1 when one failed or its data is missing (the row has status and
// error), 2 usage or setup.
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/common/bench_common.h"
#include "bench/common/bench_json.h"
#include "bench/gather/cpu_activity.h"
#include "core/json.h"
#include "core/logging.h"
#include "storage/generator.h"
#include "storage/graph.h"
#include "storage/rdf_import.h"

namespace tessel::bench {
namespace {

struct Options {
  bool quick = false;
  int import_reps = 5;
  int generate_reps = 3;
  std::string data_dir = TESSEL_DATA_DIR;
  double wait_idle = 0;
  std::string json = std::string(TESSEL_BINARY_DIR) + "/bench/results/graph.json";
  std::string commit;
};

// One case: a floor (the limit) and the builder, timed alternately.
struct CaseResult {
  std::string name;
  std::string limit_metric, measured_metric;
  std::string limit_method, measured_method;
  double target_seconds = 0;
  std::vector<double> limit_s, measured_s;
  std::string status = "ok";  // ok, missing (its data is not there) or error
  std::string error;
  double busy_before = -1, load_avg = -1;
  std::vector<std::pair<std::string, int64_t>> facts;  // sizes of what was built, for the rows and table
};

// Seconds to read and decompress `path` with zlib into a reused buffer; *text_bytes is the decompressed size.
Result<double> Gunzip(const std::string& path, int64_t* text_bytes) {
  std::vector<char> buffer(1 << 20);
  const auto t0 = Clock::now();
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return StorageError(StrCat(path, ": cannot open"));
  gzbuffer(f, 1 << 17);
  int64_t total = 0;
  for (;;) {
    const int n = gzread(f, buffer.data(), static_cast<unsigned>(buffer.size()));
    if (n < 0) {
      int code = 0;
      const std::string why = gzerror(f, &code);
      gzclose(f);
      return BadDataError(StrCat(path, ": ", why));
    }
    if (n == 0) break;
    total += n;
  }
  gzclose(f);
  *text_bytes = total;
  return SecondsSince(t0);
}

int64_t GraphBytes(const storage::HeteroGraph& g) {
  int64_t bytes = 0;
  for (const storage::Relation& r : g.relations) {
    bytes += static_cast<int64_t>((r.src.size() + r.dst.size()) * sizeof(int64_t));
  }
  for (const storage::NodeType& t : g.node_types) {
    bytes += static_cast<int64_t>(t.features.size() * sizeof(float) + t.labels.size() * sizeof(int64_t) +
                                  t.train_mask.size() + t.val_mask.size() + t.test_mask.size());
  }
  return bytes;
}

// Seconds to allocate `bytes` of fresh memory and write every byte of it (page faults included, as the
// generator's vectors take them), then free it.
double Fill(int64_t bytes) {
  if (bytes <= 0) return 0;
  const auto t0 = Clock::now();
  std::unique_ptr<char[]> p(new char[static_cast<size_t>(bytes)]);
  std::memset(p.get(), 1, static_cast<size_t>(bytes));
  // Keep the stores: read one byte back through a volatile.
  volatile char sink = p[static_cast<size_t>(bytes) - 1];
  (void)sink;
  p.reset();
  return SecondsSince(t0);
}

void Prepare(const Options& o, CaseResult* r) {
  r->busy_before = WaitIdle(o.wait_idle);
  r->load_avg = LoadAverage();
}

Status RunImport(const Options& o, CaseResult* r) {
  const std::string dir = o.data_dir + "/aifb";
  storage::RdfImportOptions opts;
  opts.triples = dir + "/aifb_stripped.nt.gz";
  opts.train_labels = dir + "/trainingSet.tsv";
  opts.test_labels = dir + "/testSet.tsv";
  for (const std::string& path : {opts.triples, opts.train_labels, opts.test_labels}) {
    if (!std::filesystem::exists(path)) {
      r->status = "missing";
      r->error = StrCat("no AIFB data: ", path, " does not exist");
      return Status::Ok();
    }
  }
  Prepare(o, r);
  int64_t text_bytes = 0;
  for (int rep = 0; rep < o.import_reps; ++rep) {
    TESSEL_ASSIGN_OR_RETURN(double gunzip, Gunzip(opts.triples, &text_bytes));
    r->limit_s.push_back(gunzip);
    const auto t0 = Clock::now();
    Result<storage::HeteroGraph> g = storage::ImportRdf(opts);
    const double seconds = SecondsSince(t0);
    if (!g.ok()) return g.status();
    r->measured_s.push_back(seconds);
    if (rep == 0) {
      r->facts = {{"nodes", g->num_nodes()},
                  {"edges", g->num_edges()},
                  {"input_bytes", static_cast<int64_t>(std::filesystem::file_size(opts.triples))},
                  {"text_bytes", text_bytes}};
    }
  }
  return Status::Ok();
}

Status RunGenerate(const Options& o, CaseResult* r) {
  storage::GenerateOptions opts;
  opts.nodes = 1000000;
  opts.avg_degree = 20;  // 10M base edges
  opts.feature_dim = 16;
  Prepare(o, r);
  for (int rep = 0; rep < o.generate_reps; ++rep) {
    int64_t bytes = 0;
    double seconds = 0;
    {
      const auto t0 = Clock::now();
      Result<storage::HeteroGraph> g = storage::GenerateGraph(opts);
      seconds = SecondsSince(t0);  // the graph's own destruction is not part of it
      if (!g.ok()) return g.status();
      bytes = GraphBytes(*g);
      if (rep == 0) r->facts = {{"nodes", g->num_nodes()}, {"edges", g->num_edges()}, {"graph_bytes", bytes}};
    }
    r->measured_s.push_back(seconds);
    r->limit_s.push_back(Fill(bytes));
  }
  return Status::Ok();
}

void WriteRows(Json& rows, const Options& o, const CaseResult& c) {
  const bool ok = c.status == "ok";
  auto common = [&](const std::string& metric, const std::vector<double>& samples, const std::string& method) {
    Json row = {{"bench", "graph"}, {"case", c.name}, {"metric", metric}};
    row["value"] = ok ? Json(Round(Median(samples), 10000)) : Json();
    row["unit"] = "s";
    row["samples"] = samples;
    row["method"] = method;
    row["repetitions"] = static_cast<int64_t>(samples.size());
    row["threads"] = int64_t{1};
    for (const auto& [key, value] : c.facts) row[key] = value;
    row["status"] = c.status;
    if (!ok) row["error"] = c.error;
    row["busy_before"] = Round(c.busy_before, 1000);
    row["load_avg"] = Round(c.load_avg, 100);
    if (!o.commit.empty()) row["commit"] = o.commit;
    return row;
  };
  rows.push_back(common(c.limit_metric, c.limit_s, c.limit_method + " (the limit)"));
  Json measured_row = common(c.measured_metric, c.measured_s, c.measured_method);
  if (ok) {
    const double limit = Median(c.limit_s), measured = Median(c.measured_s);
    measured_row["baseline"] = Round(limit, 10000);
    measured_row["baseline_metric"] = c.limit_metric;
    measured_row["ratio"] = Round(measured / limit, 100);
    measured_row["fraction_of_limit"] = Round(limit / measured, 10000);
    measured_row["target_seconds"] = c.target_seconds;
    measured_row["meets_target"] = measured < c.target_seconds;
  }
  rows.push_back(std::move(measured_row));
}

void PrintTable(const std::vector<CaseResult>& results) {
  std::printf("\ngraph: one thread, median seconds; the limit is measured in the same run\n\n");
  std::printf("%-13s %-8s %9s %10s %9s %9s %6s  %s\n", "case", "limit", "limit_s", "measured_s", "fraction", "target_s",
              "meets", "built");
  for (const CaseResult& c : results) {
    if (c.status != "ok") {
      std::printf("%-13s %s: %s\n", c.name.c_str(), c.status.c_str(), c.error.c_str());
      continue;
    }
    const double limit = Median(c.limit_s), measured = Median(c.measured_s);
    std::string built;
    for (const auto& [key, value] : c.facts) built += StrCat(built.empty() ? "" : ", ", value, " ", key);
    std::printf("%-13s %-8s %9.3f %10.3f %9.3f %9.1f %6s  %s\n", c.name.c_str(),
                c.limit_metric.substr(0, c.limit_metric.find('_')).c_str(), limit, measured, limit / measured,
                c.target_seconds, measured < c.target_seconds ? "yes" : "NO", built.c_str());
  }
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "tessel-bench-graph: %s\nusage: tessel-bench-graph [--quick] [--reps N] [--data-dir DIR] "
               "[--wait-idle S] [--json FILE] [--commit ID]\n",
               why);
  return 2;
}

int ParseOptions(int argc, char** argv, Options* o) {
  int64_t reps = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    int64_t v = 0;
    if (arg == "--quick") {
      o->quick = true;
    } else if (arg == "--reps" && has_value) {
      if (!ParseInt(argv[++i], 1, 1000, &reps)) return Usage("--reps must be 1 .. 1000");
    } else if (arg == "--data-dir" && has_value) {
      o->data_dir = argv[++i];
    } else if (arg == "--wait-idle" && has_value) {
      if (!ParseInt(argv[++i], 0, 3600, &v)) return Usage("--wait-idle takes whole seconds, 0 .. 3600");
      o->wait_idle = static_cast<double>(v);
    } else if (arg == "--json" && has_value) {
      o->json = argv[++i];
    } else if (arg == "--commit" && has_value) {
      o->commit = argv[++i];
    } else if (arg == "--help" || arg == "-h") {
      Usage("times the RDF import of AIFB and the 1M-node generator against floors measured in the same run");
      return 0;
    } else {
      return Usage(("unknown or incomplete argument " + std::string(arg)).c_str());
    }
  }
  if (o->quick) {
    o->import_reps = 3;
    o->generate_reps = 1;
  }
  if (reps > 0) o->import_reps = o->generate_reps = static_cast<int>(reps);
  return -1;
}

int Main(int argc, char** argv) {
  Options options;
  if (const int code = ParseOptions(argc, argv, &options); code >= 0) return code;

  std::vector<CaseResult> results(2);
  CaseResult& import = results[0];
  import.name = "aifb_import";
  import.limit_metric = "gunzip_seconds";
  import.limit_method = "gzread of aifb_stripped.nt.gz into a 1 MiB buffer";
  import.measured_metric = "import_seconds";
  import.measured_method = "storage::ImportRdf (triples + train/test labels), in process";
  import.target_seconds = 2.0;
  CaseResult& generate = results[1];
  generate.name = "generate_1m";
  generate.limit_metric = "fill_seconds";
  generate.limit_method = "new + memset of the generated graph's bytes (fresh pages)";
  generate.measured_metric = "generate_seconds";
  generate.measured_method = "storage::GenerateGraph, 1M nodes, avg_degree 20, 16 features";
  generate.target_seconds = 60.0;

  int failures = 0;
  std::fprintf(stderr, "[graph] aifb_import (%s/aifb) ...\n", options.data_dir.c_str());
  if (Status st = RunImport(options, &import); !st.ok()) {
    import.status = "error";
    import.error = st.ToString();
  }
  std::fprintf(stderr, "[graph] generate_1m ...\n");
  if (Status st = RunGenerate(options, &generate); !st.ok()) {
    generate.status = "error";
    generate.error = st.ToString();
  }
  for (const CaseResult& c : results) failures += c.status != "ok";

  PrintTable(results);
  Json rows = Json::array();
  for (const CaseResult& c : results) WriteRows(rows, options, c);
  if (!WriteJsonRows("tessel-bench-graph", options.json, rows)) return 2;
  return failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace tessel::bench

int main(int argc, char** argv) { return tessel::bench::Main(argc, argv); }

// libFuzzer target: the graph-file loader (storage/graph.h ReadGraph). The input is an HDF5 graph file,
// written to a file (one per process, rewritten each run) and read with ReadGraph. A file may be refused,
// but a graph it returns must be valid, and must survive WriteGraph + ReadGraph unchanged.
//
// Seeds: `graph_file_fuzz --write-seeds=DIR` writes small graphs with WriteGraph (tests/fuzz/README.md).
#include <hdf5.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/logging.h"
#include "storage/graph.h"
#include "tests/fuzz/fuzz_util.h"

namespace tessel::storage {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "graph_file_fuzz: %s\n", what.c_str());
  std::abort();
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// "" when equal, else the first difference.
std::string Difference(const HeteroGraph& a, const HeteroGraph& b) {
  if (a.name != b.name) return "name";
  if (a.num_classes != b.num_classes || a.class_names != b.class_names) return "classes";
  if (a.source_fingerprint != b.source_fingerprint) return "source_fingerprint";
  if (a.node_types.size() != b.node_types.size()) return "number of node types";
  for (size_t i = 0; i < a.node_types.size(); ++i) {
    const NodeType &s = a.node_types[i], &t = b.node_types[i];
    if (s.name != t.name || s.count != t.count || s.feature_dim != t.feature_dim || !SameBits(s.features, t.features) ||
        s.labels != t.labels || s.train_mask != t.train_mask || s.val_mask != t.val_mask ||
        s.test_mask != t.test_mask) {
      return StrCat("node type ", i, " (", s.name, ")");
    }
  }
  if (a.relations.size() != b.relations.size()) return "number of relations";
  for (size_t i = 0; i < a.relations.size(); ++i) {
    const Relation &r = a.relations[i], &s = b.relations[i];
    if (r.name != s.name || r.src_type != s.src_type || r.dst_type != s.dst_type || r.kind != s.kind ||
        r.src != s.src || r.dst != s.dst) {
      return StrCat("relation ", i, " (", r.name, ")");
    }
  }
  return "";
}

void Check(const uint8_t* data, size_t size) {
  static const std::string input = fuzz::ScratchPath("graph_file_fuzz", "input.h5");
  static const std::string copy = fuzz::ScratchPath("graph_file_fuzz", "copy.h5");
  {
    std::ofstream out(input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) Fail("cannot write " + input);
  }
  Result<HeteroGraph> g = ReadGraph(input);
  if (!g.ok()) return;
  if (Status st = g->Validate(); !st.ok()) Fail("ReadGraph returned an invalid graph: " + st.ToString());
  if (Status st = WriteGraph(*g, copy); !st.ok()) Fail("WriteGraph refuses what ReadGraph returned: " + st.ToString());
  Result<HeteroGraph> again = ReadGraph(copy);
  if (!again.ok()) Fail("ReadGraph refuses what WriteGraph wrote: " + again.status().ToString());
  if (const std::string diff = Difference(*g, *again); !diff.empty())
    Fail("the graph changed in a round trip: " + diff);
}

// ---- seeds ------------------------------------------------------------------------------------------

// Two node types (features, labels and masks on the first), a relation between them, its inverse, a
// self-loop, class names and a fingerprint.
HeteroGraph TwoTypeGraph() {
  HeteroGraph g;
  g.name = "tiny";
  g.num_classes = 2;
  g.class_names = {"<http://ex/A>", "<http://ex/B>"};
  g.source_fingerprint = "tessel fuzz seed";
  NodeType& paper = g.node_types.emplace_back();
  paper.name = "paper";
  paper.count = 3;
  paper.feature_dim = 2;
  paper.features = {0.5f, -1.f, 0.f, 2.25f, -0.f, 1e-3f};
  paper.labels = {0, 1, -1};
  paper.train_mask = {1, 0, 0};
  paper.val_mask = {0, 1, 0};
  paper.test_mask = {0, 0, 0};
  NodeType& author = g.node_types.emplace_back();
  author.name = "author";
  author.count = 2;
  g.relations.push_back({"writes", 1, 0, RelationKind::kBase, {0, 1, 1}, {0, 1, 2}});
  g.relations.push_back({"writes^-1", 0, 1, RelationKind::kInverse, {0, 1, 2}, {0, 1, 1}});
  g.relations.push_back({"self_loop", 0, 0, RelationKind::kSelfLoop, {0, 1, 2}, {0, 1, 2}});
  return g;
}

// One node type, no features or labels, one relation with no edges.
HeteroGraph BareGraph() {
  HeteroGraph g;
  g.name = "bare";
  NodeType& entity = g.node_types.emplace_back();
  entity.name = "entity";
  entity.count = 1;
  g.relations.push_back({"empty", 0, 0, RelationKind::kBase, {}, {}});
  return g;
}

void WriteSeeds(const std::string& dir) {
  const std::pair<const char*, HeteroGraph> seeds[] = {{"two_types.h5", TwoTypeGraph()}, {"bare.h5", BareGraph()}};
  for (const auto& [name, graph] : seeds) {
    if (Status st = WriteGraph(graph, StrCat(dir, "/", name)); !st.ok()) Fail(st.ToString());
  }
}

}  // namespace
}  // namespace tessel::storage

// HDF5 1.10 leaks a metadata cache entry when it fails to decode a corrupt object header (allocated in
// H5C_protect, lost on its error path): leaks whose allocation passed through libhdf5 are HDF5's own. An
// hid_t that Tessel failed to close would not show here anyway: HDF5's ID table still reaches it.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5\n"; }
extern "C" const char* __lsan_default_options() { return "print_suppressions=0"; }
// HDF5 sizes some of its buffers from lengths in the file and handles a malloc that returns null; without
// this, ASan would report the absurd request (> 1 TiB) of a corrupt length as a crash.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // ReadGraph silences its own calls; this covers the rest
  tessel::fuzz::WriteSeedsIfAsked(*argc, *argv, tessel::storage::WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessel::storage::Check(data, size);
  return 0;
}

// libFuzzer target: the N-Triples importer (storage/rdf_import.h). The input is an N-Triples file.
//   - Each line goes through ParseNTriplesLine. A statement it accepts is written back from its
//     canonical terms (escaping in IRIs what N-Triples forbids there raw) and must parse to the same terms.
//   - The whole input, written to a file (one per process, rewritten each run), goes through ImportRdf.
//     When every line parsed and at least one is a statement, the import must succeed with a valid graph
//     of one node per distinct term, 2R + 1 relations for R distinct predicates, one edge per distinct
//     triple in the base and in the inverse relations, and one self-loop per node.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

#include "core/logging.h"
#include "storage/rdf_import.h"
#include "tests/fuzz/fuzz_util.h"

namespace tessel::storage {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "ntriples_fuzz: %s\n", what.c_str());
  std::abort();
}

// A canonical IRI term (<...>) as N-Triples: characters an IRI may not hold raw become \u escapes.
std::string IriText(std::string_view term) {
  std::string out = "<";
  for (char c : term.substr(1, term.size() - 2)) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || std::string_view("<>\"{}|^`\\").find(c) != std::string_view::npos) {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\u%04X", u);
      out += escape;
    } else {
      out += c;
    }
  }
  return out + ">";
}

// A canonical term as N-Triples. A literal's text is already escaped; its datatype is an IRI.
std::string TermText(const std::string& term) {
  if (term.empty()) Fail("an empty canonical term");
  if (term.front() == '<') return IriText(term);
  if (term.front() != '"') return term;  // a blank node
  size_t end = 1;
  while (end < term.size() && term[end] != '"') end += term[end] == '\\' ? 2 : 1;
  if (end >= term.size()) Fail("a canonical literal without its closing quote: " + term);
  const std::string_view suffix = std::string_view(term).substr(end + 1);
  if (suffix.starts_with("^^")) return term.substr(0, end + 3) + IriText(suffix.substr(2));
  return term;
}

struct Expected {
  bool all_parsed = true;
  std::set<std::string> nodes, predicates;
  std::set<std::tuple<std::string, std::string, std::string>> triples;
};

void CheckLine(std::string_view line, Expected* expected) {
  NTriple t;
  Result<bool> parsed = ParseNTriplesLine(line, &t);
  if (!parsed.ok()) {
    expected->all_parsed = false;
    return;
  }
  if (!*parsed) return;
  const std::string again_text = StrCat(TermText(t.subject), " ", TermText(t.predicate), " ", TermText(t.object), " .");
  NTriple again;
  Result<bool> reparsed = ParseNTriplesLine(again_text, &again);
  if (!reparsed.ok() || !*reparsed) {
    Fail(StrCat("a statement written back from its terms does not parse: ", again_text, " -> ",
                reparsed.ok() ? "no statement" : reparsed.status().ToString()));
  }
  if (again.subject != t.subject || again.predicate != t.predicate || again.object != t.object) {
    Fail(StrCat("a statement written back parses to other terms: ", again_text));
  }
  expected->nodes.insert(t.subject);
  expected->nodes.insert(t.object);
  expected->predicates.insert(t.predicate);
  expected->triples.emplace(t.subject, t.predicate, t.object);
}

void CheckImport(const uint8_t* data, size_t size, const Expected& expected) {
  static const std::string input = fuzz::ScratchPath("ntriples_fuzz", "input.nt");
  {
    std::ofstream out(input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) Fail("cannot write " + input);
  }
  Result<HeteroGraph> g = ImportRdf(RdfImportOptions{.triples = input});
  // The reader takes a first block with NULs and a ustar magic for a corrupt tar header; a statement
  // may hold NULs in a literal, so such an input is only required not to crash.
  const std::string_view head(reinterpret_cast<const char*>(data), std::min<size_t>(size, 512));
  if (!expected.all_parsed || expected.triples.empty() || head.find('\0') != std::string_view::npos) return;
  if (!g.ok()) Fail("every line parses but ImportRdf fails: " + g.status().ToString());
  if (Status st = g->Validate(); !st.ok()) Fail("ImportRdf made an invalid graph: " + st.ToString());
  const auto nodes = static_cast<int64_t>(expected.nodes.size());
  const size_t r = expected.predicates.size();
  if (g->node_types.size() != 1 || g->node_types[0].count != nodes) {
    Fail(StrCat("expected one node type of ", nodes, " nodes, found ", g->num_nodes(), " nodes"));
  }
  if (g->relations.size() != 2 * r + 1) {
    Fail(StrCat("expected ", 2 * r + 1, " relations for ", r, " predicates, found ", g->relations.size()));
  }
  size_t base_edges = 0, inverse_edges = 0;
  for (size_t i = 0; i < 2 * r; ++i) (i < r ? base_edges : inverse_edges) += g->relations[i].src.size();
  if (base_edges != expected.triples.size() || inverse_edges != expected.triples.size()) {
    Fail(StrCat("expected ", expected.triples.size(), " distinct triples, found ", base_edges, " base and ",
                inverse_edges, " inverse edges"));
  }
  if (static_cast<int64_t>(g->relations.back().src.size()) != nodes) {
    Fail(StrCat("expected ", nodes, " self-loops, found ", g->relations.back().src.size()));
  }
}

void Check(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Expected expected;
  // Lines as storage/line_reader.h splits them: at '\n', without a trailing '\r'.
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    CheckLine(line, &expected);
    pos = end + 1;
  }
  CheckImport(data, size, expected);
}

}  // namespace
}  // namespace tessel::storage

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessel::storage::Check(data, size);
  return 0;
}

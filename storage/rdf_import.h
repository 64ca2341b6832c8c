// `tessel import rdf`: an N-Triples file (plain or gzip) plus optional label TSVs -> HeteroGraph.
//
// Every distinct subject and object is a node of the one node type "entity", literals included. A
// node's identity is its canonical N-Triples term: <iri>, _:label, or "value" with its @lang or
// ^^<datatype> suffix, where escapes are decoded and re-escaped minimally (so "\u0041" and "A" are
// the same literal). Relations are laid out as in edges_import.h with inverse edges and the self-loop
// always on: R base predicates (named by their IRI, without brackets), R inverses ("IRI^-1") and one
// "self_loop": 2R+1 relations. Duplicate triples count once.
//
// Labels: TSV files with a header row; the entity column (first by default) holds an IRI (with or
// without <>), the label column (last by default) a class string. Classes are the sorted distinct
// label strings over all label files; they are stored as class_names.
//
// Thread safety: plain functions. Failure: kBadData "file:LINE: malformed triple: <reason>", a
// truncated or corrupt gzip file names the file, an unknown entity in a label file names file and line.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "storage/graph.h"

namespace tessel::storage {

struct RdfImportOptions {
  std::string triples;       // .nt or .nt.gz
  std::string train_labels;  // optional label TSVs
  std::string val_labels;
  std::string test_labels;
  std::string entity_column;  // header name of the entity column; empty = first column
  std::string label_column;   // header name of the label column; empty = last column
  std::string name;           // graph name; empty = the triples file's base name without extensions
};

Result<HeteroGraph> ImportRdf(const RdfImportOptions& options);

// One parsed N-Triples statement, each term in canonical form (see above).
struct NTriple {
  std::string subject, predicate, object;
};

// Parses one line. Returns true with *out filled for a statement, false for a blank or comment line.
// A malformed line is kBadData whose message is the bare reason ("unterminated IRI at column 7"); the
// importer prefixes "file:LINE: malformed triple: ".
Result<bool> ParseNTriplesLine(std::string_view line, NTriple* out);

}  // namespace tessel::storage

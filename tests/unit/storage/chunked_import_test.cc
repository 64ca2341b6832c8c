// Tests for storage/chunked_import.cc and storage/npy.cc: DGL's chunked graph format. The .npy files here
// are written byte by byte from the format's specification (numpy.lib.format: magic, version, header
// length, a dict literal, the raw elements), not by Tessel's reader; tests/integration/chunked_import.sh
// reads chunks that numpy itself wrote.
#include "storage/chunked_import.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "core/json.h"
#include "storage/npy.h"
#include "tests/unit/storage/test_util.h"

namespace tessel::storage {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::WriteText;

// A .npy file of `descr` and `shape` (the dict's text, e.g. "(3, 2)") holding `data`, in format version
// `major` (1: a 2-byte header length, 2: 4 bytes).
std::string Npy(const std::string& descr, const std::string& shape, const void* data, size_t bytes,
                const std::string& fortran = "False", int major = 1) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const auto len = static_cast<uint32_t>(dict.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (major > 1) {
    out += static_cast<char>((len >> 16) & 0xff);
    out += static_cast<char>((len >> 24) & 0xff);
  }
  out += dict;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}
template <typename T>
std::string Npy(const std::string& descr, const std::string& shape, const std::vector<T>& v) {
  return Npy(descr, shape, v.data(), v.size() * sizeof(T));
}

// A two-type graph (author: 3 nodes, paper: 4), written as DGL's documentation shows it: edges as
// space-separated CSV chunks, node data as .npy chunks; `edit` changes metadata.json before it is written.
struct Fixture {
  ScratchDir dir;
  Json meta;

  Fixture() {
    const std::filesystem::path p = dir.path();
    std::filesystem::create_directories(p / "edges");
    std::filesystem::create_directories(p / "node_data");
    WriteText(dir.File("edges/writes-0.csv"), "0 0\n1 2\n");
    WriteText(dir.File("edges/writes-1.csv"), "2 3\n");
    const std::vector<int64_t> cites = {0, 1, 1, 2, 3, 0, 2, 2};
    WriteText(dir.File("edges/cites-0.npy"), Npy("<i8", "(4, 2)", cites));
    WriteText(dir.File("node_data/paper-feat-0.npy"), Npy("<f4", "(3, 2)", std::vector<float>{1, 2, 3, 4, 5, 6}));
    WriteText(dir.File("node_data/paper-feat-1.npy"), Npy("<f8", "(1, 2)", std::vector<double>{7.5, -8}));
    WriteText(dir.File("node_data/paper-label.npy"), Npy("<i4", "(4,)", std::vector<int32_t>{0, 2, 1, -1}));
    WriteText(dir.File("node_data/paper-train.npy"), Npy("|b1", "(4,)", std::vector<uint8_t>{1, 1, 0, 0}));
    WriteText(dir.File("node_data/paper-val.npy"), Npy("|u1", "(4,)", std::vector<uint8_t>{0, 0, 1, 0}));
    WriteText(dir.File("node_data/paper-year.npy"), Npy("<i8", "(4,)", std::vector<int64_t>{1999, 2000, 2001, 2002}));
    meta = Json::parse(R"({
      "graph_name": "tiny",
      "node_type": ["author", "paper"],
      "num_nodes_per_chunk": [[3], [3, 1]],
      "edge_type": ["author:writes:paper", "paper:cites:paper"],
      "num_edges_per_chunk": [[2, 1], [4]],
      "edges": {
        "author:writes:paper": {"format": {"name": "csv", "delimiter": " "},
                                "data": ["edges/writes-0.csv", "edges/writes-1.csv"]},
        "paper:cites:paper": {"format": {"name": "numpy"}, "data": ["edges/cites-0.npy"]}
      },
      "node_data": {
        "paper": {
          "feat": {"format": {"name": "numpy"}, "data": ["node_data/paper-feat-0.npy", "node_data/paper-feat-1.npy"]},
          "label": {"format": {"name": "numpy"}, "data": ["node_data/paper-label.npy"]},
          "train_mask": {"format": {"name": "numpy"}, "data": ["node_data/paper-train.npy"]},
          "val_mask": {"format": {"name": "numpy"}, "data": ["node_data/paper-val.npy"]},
          "year": {"format": {"name": "numpy"}, "data": ["node_data/paper-year.npy"]}
        }
      },
      "edge_data": {"paper:cites:paper": {"weight": {"format": {"name": "numpy"}, "data": []}}}
    })");
  }
  Result<ChunkedImport> Import(ChunkedImportOptions o = {}) {
    WriteText(dir.File("metadata.json"), FormatJson(meta, JsonLayout::kIndented));
    o.dir = dir.path().string();
    return ImportChunked(o);
  }
};

TEST(ChunkedImport, ReadsCsvAndNumpyChunksAsDglDocumentsThem) {
  Fixture f;
  Result<ChunkedImport> r = f.Import();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const HeteroGraph& g = r->graph;
  EXPECT_EQ(g.name, "tiny");
  ASSERT_EQ(g.node_types.size(), 2u);
  EXPECT_EQ(g.node_types[0].name, "author");
  EXPECT_EQ(g.node_types[0].count, 3);
  EXPECT_EQ(g.node_types[0].feature_dim, 0);
  const NodeType& paper = g.node_types[1];
  EXPECT_EQ(paper.count, 4);
  EXPECT_EQ(paper.feature_dim, 2);
  EXPECT_EQ(paper.features, (std::vector<float>{1, 2, 3, 4, 5, 6, 7.5, -8}));
  EXPECT_EQ(paper.labels, (std::vector<int64_t>{0, 2, 1, -1}));
  EXPECT_EQ(paper.train_mask, (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(paper.val_mask, (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_TRUE(paper.test_mask.empty());
  EXPECT_EQ(g.num_classes, 3);
  ASSERT_EQ(g.relations.size(), 2u);
  EXPECT_EQ(g.relations[0].name, "writes");
  EXPECT_EQ(g.relations[0].src_type, 0);
  EXPECT_EQ(g.relations[0].dst_type, 1);
  EXPECT_EQ(g.relations[0].src, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(g.relations[0].dst, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(g.relations[1].name, "cites");
  EXPECT_EQ(g.relations[1].src, (std::vector<int64_t>{0, 1, 3, 2}));
  EXPECT_EQ(g.relations[1].dst, (std::vector<int64_t>{1, 2, 0, 2}));
  EXPECT_EQ(r->ignored, (std::vector<std::string>{"paper/year", "paper:cites:paper/weight"}));
}

TEST(ChunkedImport, PerTypeCountsSharedRelationNamesInverseAndSelfLoops) {
  Fixture f;
  f.meta.erase("num_nodes_per_chunk");
  f.meta["num_nodes_per_type"] = {3, 4};
  f.meta.erase("num_edges_per_chunk");
  f.meta["num_edges_per_type"] = {3, 4};
  // The same relation name twice: both relations get their canonical names.
  f.meta["edge_type"][1] = "paper:writes:paper";
  f.meta["edges"]["paper:writes:paper"] = f.meta["edges"]["paper:cites:paper"];
  f.meta["edges"].erase("paper:cites:paper");
  f.meta.erase("edge_data");
  ChunkedImportOptions o;
  o.add_inverse = o.add_self_loop = true;
  o.name = "renamed";
  Result<ChunkedImport> r = f.Import(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const HeteroGraph& g = r->graph;
  EXPECT_EQ(g.name, "renamed");
  std::vector<std::string> names;
  for (const Relation& rel : g.relations) names.push_back(rel.name);
  EXPECT_EQ(names, (std::vector<std::string>{"author:writes:paper", "paper:writes:paper", "author:writes:paper^-1",
                                             "paper:writes:paper^-1", "self_loop:author", "self_loop:paper"}));
  EXPECT_EQ(g.relations[2].src, g.relations[0].dst);
  EXPECT_EQ(g.relations[2].src_type, 1);
  EXPECT_EQ(g.relations[5].src, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(g.relations[5].kind, RelationKind::kSelfLoop);
}

struct BadCase {
  const char* name;
  std::function<void(Fixture&)> edit;
  const char* message;  // a substring of the error
};

TEST(ChunkedImport, EveryBadInputNamesItsFileAndCause) {
  const std::vector<BadCase> cases = {
      {"not an object", [](Fixture& f) { f.meta = Json(); }, "metadata.json: (top level): expected a JSON object"},
      {"unknown node type", [](Fixture& f) { f.meta["edge_type"][0] = "writer:writes:paper"; },
       "edge_type: 'writer:writes:paper': 'writer' is not in node_type"},
      {"not a triple", [](Fixture& f) { f.meta["edge_type"][0] = "author:paper"; },
       "'author:paper' is not \"src_type:relation:dst_type\""},
      {"fewer files than chunks",
       [](Fixture& f) {
         f.meta["num_edges_per_chunk"][0] = {1, 1, 1};
       },
       "edges.author:writes:paper.data: 2 files, but num_edges_per_chunk gives 3 chunks"},
      {"a chunk of another size",
       [](Fixture& f) {
         f.meta["num_edges_per_chunk"][0] = {1, 2};
       },
       "writes-0.csv: 2 edges, but"},
      {"totals that disagree",
       [](Fixture& f) {
         f.meta["num_nodes_per_type"] = {3, 5};
       },
       "num_nodes_per_type: type 1 has 5, but num_nodes_per_chunk sums to 4"},
      {"an id out of range", [](Fixture& f) { WriteText(f.dir.File("edges/writes-1.csv"), "3 3\n"); },
       "writes-1.csv:1: source id 3 is out of range for node type 'author' (3 nodes)"},
      {"not an id", [](Fixture& f) { WriteText(f.dir.File("edges/writes-1.csv"), "2 x3\n"); },
       "writes-1.csv:1: 'x3' is not an integer id"},
      {"three columns", [](Fixture& f) { WriteText(f.dir.File("edges/writes-1.csv"), "2 3 1\n"); },
       "writes-1.csv:1: expected two ids separated by ' '"},
      {"node data rows",
       [](Fixture& f) { f.meta["node_data"]["paper"]["label"]["data"].push_back("node_data/paper-label.npy"); },
       "node_data.paper.label: its chunks hold 8 rows, node type 'paper' has 4 nodes"},
      {"truncated npy",
       [](Fixture& f) {
         std::string b = testing::ReadBytes(f.dir.File("node_data/paper-feat-0.npy"));
         WriteText(f.dir.File("node_data/paper-feat-0.npy"), b.substr(0, b.size() - 3));
       },
       "paper-feat-0.npy: has 149 bytes, but its header (dtype '<f4', shape of 6 elements) says 152: truncated"},
      {"not npy", [](Fixture& f) { WriteText(f.dir.File("node_data/paper-val.npy"), "0,0,1,0\n"); },
       "paper-val.npy: not a NumPy .npy file"},
      {"fortran order",
       [](Fixture& f) {
         const std::vector<float> v(6, 1.0f);
         WriteText(f.dir.File("node_data/paper-feat-0.npy"), Npy("<f4", "(3, 2)", v.data(), 24, "True"));
       },
       "paper-feat-0.npy: a Fortran-order array"},
      {"big-endian",
       [](Fixture& f) {
         WriteText(f.dir.File("node_data/paper-feat-0.npy"), Npy(">f4", "(3, 2)", std::vector<float>(6)));
       },
       "a big-endian array ('>f4')"},
      {"float labels",
       [](Fixture& f) {
         WriteText(f.dir.File("node_data/paper-label.npy"), Npy("<f4", "(4,)", std::vector<float>(4)));
       },
       "paper-label.npy: dtype '<f4' holds floating-point values; expected integers"},
      {"a mask of 2",
       [](Fixture& f) {
         WriteText(f.dir.File("node_data/paper-val.npy"), Npy("|u1", "(4,)", std::vector<uint8_t>{0, 2, 0, 0}));
       },
       "paper-val.npy: element 1 (dtype '|u1') is not representable as a 0/1 mask"},
      {"label below -1",
       [](Fixture& f) {
         WriteText(f.dir.File("node_data/paper-label.npy"), Npy("<i8", "(4,)", std::vector<int64_t>{0, -2, 0, 0}));
       },
       "node_data.paper.label: node 1 has label -2"},
      {"parquet", [](Fixture& f) { f.meta["edges"]["paper:cites:paper"]["format"]["name"] = "parquet"; },
       "edges.paper:cites:paper.format: Parquet chunks are not supported"},
      {"a missing chunk", [](Fixture& f) { std::filesystem::remove(f.dir.File("edges/writes-0.csv")); },
       "writes-0.csv"},
      {"edges of an unknown type", [](Fixture& f) { f.meta["edges"]["a:b:c"] = f.meta["edges"]["paper:cites:paper"]; },
       "edges.a:b:c: not in edge_type"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    Fixture f;
    c.edit(f);
    Result<ChunkedImport> r = f.Import();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kBadData) << r.status().ToString();
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

TEST(ChunkedImport, ADirectoryWithoutMetadata) {
  ScratchDir dir;
  ChunkedImportOptions o;
  o.dir = dir.path().string();
  Result<ChunkedImport> r = ImportChunked(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kBadData);
  EXPECT_THAT(r.status().message(), HasSubstr("metadata.json: cannot open"));
}

TEST(Npy, VersionTwoHeadersAndIntegerLimits) {
  ScratchDir dir;
  const std::vector<int16_t> v = {-3, 7};
  WriteText(dir.File("a.npy"), Npy("<i2", "(2,)", v.data(), 4, "False", 2));
  std::vector<int64_t> out = {42};
  Result<NpyHeader> h = AppendNpy(dir.File("a.npy"), &out);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(out, (std::vector<int64_t>{42, -3, 7}));  // appended
  EXPECT_EQ(h->shape, (std::vector<int64_t>{2}));
  const std::vector<uint64_t> big = {1, uint64_t{1} << 63};
  WriteText(dir.File("b.npy"), Npy("<u8", "(2,)", big));
  out.clear();
  h = AppendNpy(dir.File("b.npy"), &out);
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.status().message(), HasSubstr("element 1 (dtype '<u8') is not representable as int64"));
  EXPECT_TRUE(out.empty());  // nothing half-appended
  WriteText(dir.File("c.npy"), Npy("<c8", "(1,)", std::vector<float>{1, 2}));
  EXPECT_THAT(ReadNpyHeader(dir.File("c.npy")).status().message(), HasSubstr("unsupported dtype '<c8'"));
}

// A rank's share: only the rows asked, and their element numbers in errors are the file's.
TEST(Npy, RowRangesReadOnlyTheirRows) {
  ScratchDir dir;
  WriteText(dir.File("f.npy"), Npy("<f8", "(4, 3)", std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  std::vector<float> out;
  ASSERT_TRUE(AppendNpyRows(dir.File("f.npy"), 1, 2, &out).ok());
  EXPECT_EQ(out, (std::vector<float>{3, 4, 5, 6, 7, 8}));
  out.clear();
  ASSERT_TRUE(AppendNpyRows(dir.File("f.npy"), 3, -1, &out).ok());  // through the last row
  EXPECT_EQ(out, (std::vector<float>{9, 10, 11}));
  ASSERT_TRUE(AppendNpyRows(dir.File("f.npy"), 4, 0, &out).ok());  // an empty share
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(AppendNpyRows(dir.File("f.npy"), 3, 2, &out).status().code(), Code::kUsage);
  WriteText(dir.File("m.npy"), Npy("|u1", "(4,)", std::vector<uint8_t>{0, 1, 1, 2}));
  std::vector<uint8_t> mask;
  EXPECT_TRUE(AppendNpyRows(dir.File("m.npy"), 0, 3, &mask).ok());  // the bad value is outside the share
  EXPECT_THAT(AppendNpyRows(dir.File("m.npy"), 2, 2, &mask).status().message(), HasSubstr("element 3 "));
}

// Any share of a type reads its rows and every chunk's header, so all readers agree on the widths.
TEST(ChunkedImport, NodeRowsOfAShareAcrossChunks) {
  Fixture f;
  WriteText(f.dir.File("metadata.json"), FormatJson(f.meta, JsonLayout::kIndented));
  Result<ChunkedGraph> g = ReadChunkedMetadata(f.dir.path().string());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Result<ChunkedNodeRows> rows = ReadNodeRows(*g, ChunkedImportOptions{}, 1, 2, 2);  // paper rows 2 and 3
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->feature_dim, 2);
  EXPECT_EQ(rows->features, (std::vector<float>{5, 6, 7.5, -8}));  // across the two feature chunks
  EXPECT_EQ(rows->labels, (std::vector<int64_t>{1, -1}));
  EXPECT_EQ(rows->train_mask, (std::vector<uint8_t>{0, 0}));
  EXPECT_TRUE(rows->test_mask.empty());  // no such key
  rows = ReadNodeRows(*g, ChunkedImportOptions{}, 1, 4, 0);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->feature_dim, 2);
  EXPECT_TRUE(rows->features.empty());
  const HeteroGraph skeleton = ChunkedSkeleton(*g, true, true);
  ASSERT_EQ(skeleton.relations.size(), 6u);
  EXPECT_EQ(skeleton.relations[2].name, "writes^-1");
  EXPECT_EQ(skeleton.relations[5].name, "self_loop:paper");
  EXPECT_TRUE(skeleton.relations[0].src.empty());
}

}  // namespace
}  // namespace tessel::storage

// `tessel generate graph --chunked`'s writer: the chunks of any number of ranks import as one graph, the
// same whatever the rank count, of the law GenerateGraph draws from; the .npy files are NumPy's format.
#include "storage/chunked_generator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "core/logging.h"
#include "core/safe_file.h"
#include "storage/chunked_import.h"
#include "storage/npy.h"
#include "tests/unit/storage/test_util.h"

namespace tessel::storage {
namespace {

using testing::ScratchDir;

Result<HeteroGraph> WriteAndImport(const GenerateOptions& o, const std::string& dir, int ranks) {
  for (int k = 0; k < ranks; ++k) TESSEL_RETURN_IF_ERROR(WriteChunkedShare(o, dir, k, ranks));
  TESSEL_RETURN_IF_ERROR(
      WriteFileAtomically(std::filesystem::path(dir) / "metadata.json", ChunkedGraphMetadata(o, ranks)));
  ChunkedImportOptions in;
  in.dir = dir;
  TESSEL_ASSIGN_OR_RETURN(ChunkedImport imported, ImportChunked(in));
  return std::move(imported.graph);
}

TEST(ChunkedGenerator, AnyRankCountWritesTheSameGraph) {
  ScratchDir dir;
  GenerateOptions o;
  o.nodes = 1001;
  o.feature_dim = 5;
  Result<HeteroGraph> one = WriteAndImport(o, dir.File("one"), 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  Result<HeteroGraph> four = WriteAndImport(o, dir.File("four"), 4);
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  ASSERT_EQ(one->node_types.size(), 3u);
  EXPECT_EQ(one->num_nodes(), 1001);
  EXPECT_EQ(one->num_edges(), 4004);  // nodes x avg_degree / 2, duplicates kept, no derived relations
  EXPECT_EQ(one->num_classes, 4);
  for (size_t t = 0; t < 3; ++t) {
    const NodeType &a = one->node_types[t], &b = four->node_types[t];
    EXPECT_EQ(a.features, b.features);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_EQ(a.train_mask, b.train_mask);
    EXPECT_EQ(a.test_mask, b.test_mask);
    EXPECT_EQ(a.feature_dim, 5);
  }
  for (size_t r = 0; r < one->relations.size(); ++r) {
    EXPECT_EQ(one->relations[r].name, StrCat("rel", r));
    EXPECT_EQ(one->relations[r].src, four->relations[r].src);
    EXPECT_EQ(one->relations[r].dst, four->relations[r].dst);
  }
}

// The planted law: most edges of relation r go to the class pi_r(class(src)), so the destination's class is
// far from uniform given the source's; and the splits have their fractions.
TEST(ChunkedGenerator, EdgesFollowTheirRelationsClassMap) {
  ScratchDir dir;
  GenerateOptions o;
  o.nodes = 6000;
  o.feature_dim = 0;
  Result<HeteroGraph> g = WriteAndImport(o, dir.File("g"), 2);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (const Relation& r : g->relations) {
    const NodeType &s = g->node_types[static_cast<size_t>(r.src_type)],
                   &d = g->node_types[static_cast<size_t>(r.dst_type)];
    std::vector<std::vector<int64_t>> pairs(4, std::vector<int64_t>(4, 0));
    for (size_t e = 0; e < r.src.size(); ++e)
      ++pairs[static_cast<size_t>(s.labels[static_cast<size_t>(r.src[e])])]
             [static_cast<size_t>(d.labels[static_cast<size_t>(r.dst[e])])];
    int64_t best = 0, total = 0;
    for (const auto& row : pairs) {
      best += *std::max_element(row.begin(), row.end());
      for (const int64_t c : row) total += c;
    }
    // p + (1 - p) / C = 0.925 of the edges follow the map (GenerateGraph's law).
    EXPECT_NEAR(static_cast<double>(best) / static_cast<double>(total), 0.925, 0.03) << r.name;
  }
  int64_t train = 0, n = 0;
  for (const NodeType& t : g->node_types) {
    for (const uint8_t m : t.train_mask) train += m;
    n += t.count;
  }
  EXPECT_NEAR(static_cast<double>(train) / static_cast<double>(n), 0.1, 0.015);
}

TEST(NpyWriter, WritesWhatNumpyReads) {
  ScratchDir dir;
  Result<NpyWriter> w = NpyWriter::Create(dir.File("a.npy"), "<i8", 3, 2);
  ASSERT_TRUE(w.ok());
  const std::vector<int64_t> rows = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(w->Append(rows.data(), 2).ok());
  EXPECT_EQ(w->Close().code(), Code::kInternal);  // a row short of its header
  Result<NpyWriter> b = NpyWriter::Create(dir.File("b.npy"), "<i8", 3, 2);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b->Append(rows.data(), 3).ok());
  ASSERT_TRUE(b->Close().ok());
  std::ifstream in(dir.File("b.npy"), std::ios::binary);
  std::string head(10, '\0');
  in.read(head.data(), 10);
  EXPECT_EQ(head.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const int len = static_cast<unsigned char>(head[8]) | (static_cast<unsigned char>(head[9]) << 8);
  EXPECT_EQ((10 + len) % 64, 0);
  std::vector<int64_t> back;
  Result<NpyHeader> h = AppendNpy(dir.File("b.npy"), &back);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(back, rows);
}

}  // namespace
}  // namespace tessel::storage

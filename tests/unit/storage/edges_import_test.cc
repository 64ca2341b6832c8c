// Tests for storage/edges_import.cc: TSV edge lists, archives, dedupe, inverse/self-loop relations, FB15k-237.
#include "storage/edges_import.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <set>

#include "tests/unit/storage/test_util.h"
#include "tests/unit/test_data.h"

namespace tessel::storage {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::WriteText;

TEST(EdgesImport, SmallListWithDuplicatesAndCrlf) {
  ScratchDir dir;
  WriteText(dir.File("e.tsv"), "a\tr2\tb\r\nb\tr1\tc\r\na\tr2\tb\r\n\r\nc\tr1\ta");
  EdgesImportOptions opts;
  opts.inputs = {dir.File("e.tsv")};
  Result<HeteroGraph> g = ImportEdges(opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->name, "e");
  EXPECT_EQ(g->num_nodes(), 3);  // a=0, b=1, c=2
  ASSERT_EQ(g->relations.size(), 2u);
  EXPECT_EQ(g->relations[0].name, "r1");
  EXPECT_EQ(g->relations[0].src, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(g->relations[0].dst, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(g->relations[1].name, "r2");
  EXPECT_EQ(g->relations[1].src, (std::vector<int64_t>{0}));  // duplicate dropped
  EXPECT_EQ(g->num_classes, 0);
  EXPECT_EQ(g->node_types[0].feature_dim, 0);
  EXPECT_TRUE(g->node_types[0].labels.empty());
}

TEST(EdgesImport, InverseAndSelfLoopRelationsOnRequest) {
  ScratchDir dir;
  WriteText(dir.File("e.tsv"), "a\tr\tb\nb\tr\tc\n");
  EdgesImportOptions opts;
  opts.inputs = {dir.File("e.tsv")};
  opts.add_inverse = true;
  opts.add_self_loop = true;
  Result<HeteroGraph> g = ImportEdges(opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->relations.size(), 3u);
  EXPECT_EQ(g->relations[1].name, "r^-1");
  EXPECT_EQ(g->relations[1].kind, RelationKind::kInverse);
  EXPECT_EQ(g->relations[1].src, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(g->relations[1].dst, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(g->relations[2].kind, RelationKind::kSelfLoop);
  EXPECT_EQ(g->relations[2].src, (std::vector<int64_t>{0, 1, 2}));
}

TEST(EdgesImport, SeveralInputsShareNodeIds) {
  ScratchDir dir;
  WriteText(dir.File("a.txt"), "x\tr\ty\n");
  gzFile f = gzopen(dir.File("b.txt.gz").c_str(), "wb");
  const std::string text = "y\tr\tz\n";
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  EdgesImportOptions opts;
  opts.inputs = {dir.File("a.txt"), dir.File("b.txt.gz")};
  opts.name = "joined";
  Result<HeteroGraph> g = ImportEdges(opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->name, "joined");
  EXPECT_EQ(g->num_nodes(), 3);
  EXPECT_EQ(g->relations[0].src, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(g->relations[0].dst, (std::vector<int64_t>{1, 2}));
}

TEST(EdgesImport, WrongFieldCountNamesFileAndLine) {
  ScratchDir dir;
  WriteText(dir.File("e.tsv"), "a\tr\tb\na\tr\n");
  EdgesImportOptions opts;
  opts.inputs = {dir.File("e.tsv")};
  Result<HeteroGraph> g = ImportEdges(opts);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kBadData);
  EXPECT_THAT(g.status().message(), HasSubstr(dir.File("e.tsv") + ":2: expected head<TAB>relation<TAB>tail, found 2"));
  WriteText(dir.File("e.tsv"), "a\tr\tb\tc\n");
  g = ImportEdges(opts);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr(":1: expected head<TAB>relation<TAB>tail, found 4"));
  WriteText(dir.File("e.tsv"), "a\t\tb\n");
  g = ImportEdges(opts);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr(":1: empty field 2"));
}

TEST(EdgesImport, EmptyInputIsBadData) {
  ScratchDir dir;
  WriteText(dir.File("e.tsv"), "\n\n");
  EdgesImportOptions opts;
  opts.inputs = {dir.File("e.tsv")};
  Result<HeteroGraph> g = ImportEdges(opts);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kBadData);
}

TEST(EdgesImport, TarGzArchiveMembersInSortedOrder) {
  ScratchDir dir;
  std::filesystem::create_directories(dir.path() / "src");
  WriteText(dir.File("src/valid.txt"), "c\tr\td\n");
  WriteText(dir.File("src/train.txt"), "a\tr\tb\n");
  WriteText(dir.File("src/README"), "not edges\n");
  const std::string cmd = "cd '" + dir.File("src") + "' && tar -czf ../kg.tar.gz valid.txt README train.txt";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "no tar command";
  EdgesImportOptions opts;
  opts.inputs = {dir.File("kg.tar.gz")};
  Result<HeteroGraph> g = ImportEdges(opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->name, "kg");
  // train.txt sorts before valid.txt, so a=0, b=1, c=2, d=3.
  EXPECT_EQ(g->relations[0].src, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(g->relations[0].dst, (std::vector<int64_t>{1, 3}));
  opts.members = {"valid.txt"};
  g = ImportEdges(opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->num_nodes(), 2);
}

// FB15k-237 (data README, and recounted independently with Python's tarfile): 14,541 entities, 237
// relations, 272,115 + 17,535 + 20,466 = 310,116 triples, all distinct.
TEST(EdgesImport, Fb15k237HasTheKnownCounts) {
  const std::string path = test_data::DataDir() + "/fb15k-237/FB15k-237.tar.gz";
  TESSEL_NEED_DATA_FILE(path);
  EdgesImportOptions opts;
  opts.inputs = {path};
  Result<HeteroGraph> g = ImportEdges(opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->name, "FB15k-237");
  EXPECT_EQ(g->num_nodes(), 14541);
  EXPECT_EQ(g->relations.size(), 237u);
  EXPECT_EQ(g->num_edges(), 310116);
  for (const auto& r : g->relations) EXPECT_TRUE(r.name.rfind('/', 0) == 0) << r.name;  // Freebase paths

  opts.members = {"train.txt"};
  opts.add_inverse = true;
  opts.add_self_loop = true;
  g = ImportEdges(opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->relations.size(), 2u * 237 + 1);
  int64_t base = 0;
  for (const auto& r : g->relations) {
    if (r.kind == RelationKind::kBase) base += static_cast<int64_t>(r.src.size());
  }
  EXPECT_EQ(base, 272115);
}

}  // namespace
}  // namespace tessel::storage

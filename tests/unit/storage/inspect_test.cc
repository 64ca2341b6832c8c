// Tests for storage/inspect.cc: the graph summary, the generic HDF5 tree dump, and error paths.
#include "storage/inspect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <sstream>

#include "tests/unit/storage/test_util.h"

namespace tessel::storage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ScratchDir;

TEST(Inspect, ThousandsSeparators) {
  EXPECT_EQ(WithThousands(0), "0");
  EXPECT_EQ(WithThousands(999), "999");
  EXPECT_EQ(WithThousands(1000), "1,000");
  EXPECT_EQ(WithThousands(8285), "8,285");
  EXPECT_EQ(WithThousands(310116), "310,116");
  EXPECT_EQ(WithThousands(1234567890), "1,234,567,890");
  EXPECT_EQ(WithThousands(-1234), "-1,234");
}

TEST(Inspect, GraphSummaryCountsKindsTriplesAndSplits) {
  ScratchDir dir;
  HeteroGraph g = testing::SmallGraph();
  g.relations[0].src.push_back(0);  // a duplicate base edge: 5 edges, 4 distinct triples
  g.relations[0].dst.push_back(0);
  ASSERT_TRUE(WriteGraph(g, dir.File("g.h5")).ok());
  std::ostringstream out;
  ASSERT_TRUE(InspectFile(dir.File("g.h5"), {}, out).ok());
  const std::string s = out.str();
  EXPECT_THAT(s, HasSubstr("graph \"small\" (format version 1)"));
  EXPECT_THAT(s, HasSubstr("8 nodes in 2 node types"));
  EXPECT_THAT(s, HasSubstr("3 relations (1 base, 1 inverse, 1 self-loop), 14 edges"));
  EXPECT_THAT(s, HasSubstr("4 distinct triples over 1 predicate"));
  EXPECT_THAT(s, HasSubstr("2 train, 1 val, 1 test labelled nodes, 3 classes"));
  EXPECT_THAT(s, HasSubstr("paper: 5 nodes, features float32 [5, 2], 4 labelled (2 train, 1 val, 1 test)"));
  EXPECT_THAT(s, HasSubstr("author: 3 nodes, no features"));
  EXPECT_THAT(s, HasSubstr("1: 2 nodes  b"));
  EXPECT_THAT(s, HasSubstr("writes^-1"));
}

TEST(Inspect, ValOmittedWhenEmpty) {
  HeteroGraph g = testing::SmallGraph();
  g.node_types[0].val_mask.clear();
  std::ostringstream out;
  PrintGraphSummary(g, {}, out);
  EXPECT_THAT(out.str(), HasSubstr("2 train, 1 test labelled nodes, 3 classes"));
}

TEST(Inspect, LongRelationListsAreCut) {
  HeteroGraph g = testing::SmallGraph();
  for (int i = 0; i < 50; ++i) {
    Relation r = g.relations[0];
    r.name = "extra" + std::to_string(i);
    g.relations.push_back(r);
  }
  std::ostringstream out;
  PrintGraphSummary(g, {}, out);
  EXPECT_THAT(out.str(), HasSubstr("... 13 more"));
  std::ostringstream all;
  PrintGraphSummary(g, {.max_relations = -1}, all);
  EXPECT_THAT(all.str(), HasSubstr("extra49"));
  EXPECT_THAT(all.str(), Not(HasSubstr("more")));
}

TEST(Inspect, OtherHdf5FilesGetATreeDump) {
  ScratchDir dir;
  const std::string path = dir.File("spill.h5");
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t grp = H5Gcreate2(f, "slots", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {3, 4};
  hid_t space = H5Screate_simple(2, dims, nullptr);
  hid_t d = H5Dcreate2(grp, "slot0", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t scalar = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(d, "step", H5T_NATIVE_INT64, scalar, H5P_DEFAULT, H5P_DEFAULT);
  const int64_t step = 17;
  H5Awrite(a, H5T_NATIVE_INT64, &step);
  H5Aclose(a);
  H5Sclose(scalar);
  H5Dclose(d);
  H5Sclose(space);
  H5Gclose(grp);
  H5Fclose(f);
  std::ostringstream out;
  Status st = InspectFile(path, {}, out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const std::string s = out.str();
  EXPECT_THAT(s, HasSubstr("not a Tessel graph file"));
  EXPECT_THAT(s, HasSubstr("slots/"));
  EXPECT_THAT(s, HasSubstr("slot0: float32 [3, 4], contiguous"));
  EXPECT_THAT(s, HasSubstr("@step: int64 scalar = 17"));
}

TEST(Inspect, TreeViewShowsWhereAGraphFilesFeaturesLie) {
  ScratchDir dir;
  const std::string path = dir.File("g.h5");
  ASSERT_TRUE(WriteGraph(testing::SmallGraph(), path).ok());
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "/nodes/paper/features", H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  InspectOptions options;
  options.view = InspectView::kTree;
  std::ostringstream out;
  Status st = InspectFile(path, options, out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_THAT(out.str(), HasSubstr(path + ": Tessel graph file\n/\n"));
  EXPECT_THAT(out.str(), HasSubstr("features: float32 [5, 2], contiguous at byte " + std::to_string(offset) + "\n"));
  EXPECT_THAT(out.str(), Not(HasSubstr("distinct triple")));
}

TEST(Inspect, NonHdf5FileIsBadData) {
  ScratchDir dir;
  testing::WriteText(dir.File("x.h5"), "hello, not hdf5");
  std::ostringstream out;
  Status st = InspectFile(dir.File("x.h5"), {}, out);
  EXPECT_EQ(st.code(), Code::kBadData);
  EXPECT_THAT(st.message(), HasSubstr("not an HDF5 file"));
}

// Issue 32 row 12: a path that names nothing is said to be missing, not "not an HDF5 file".
TEST(Inspect, MissingFileIsNamedAsMissing) {
  ScratchDir dir;
  std::ostringstream out;
  Status st = InspectFile(dir.File("absent.h5"), {}, out);
  EXPECT_EQ(st.code(), Code::kBadData);
  EXPECT_EQ(st.message(), dir.File("absent.h5") + ": no such file");
  EXPECT_EQ(InspectFile(dir.File(""), {}, out).message(), dir.File("") + ": a directory, not an HDF5 file");
}

TEST(Inspect, CorruptGraphFileReportsTheDataset) {
  ScratchDir dir;
  ASSERT_TRUE(WriteGraph(testing::SmallGraph(), dir.File("g.h5")).ok());
  {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t f = H5Fopen(dir.File("g.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "/relations/1/dst", H5P_DEFAULT);
    H5Fclose(f);
  }
  std::ostringstream out;
  Status st = InspectFile(dir.File("g.h5"), {}, out);
  EXPECT_EQ(st.code(), Code::kBadData);
  EXPECT_THAT(st.message(), HasSubstr("/relations/1/dst: missing dataset"));
}

}  // namespace
}  // namespace tessel::storage

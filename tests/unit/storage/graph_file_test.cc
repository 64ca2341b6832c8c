// Tests for storage/graph_file.cc: the HDF5 graph file round trip and every validation path of ReadGraph.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <limits>
#include <random>

#include "core/logging.h"
#include "storage/graph.h"
#include "tests/unit/storage/test_util.h"

// HDF5 1.10 itself leaks a few metadata-cache blocks on the error paths of corrupt files (every hid_t
// we open is closed: the tests check H5Fget_obj_count). Tell LeakSanitizer to ignore only those.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5_serial.so\n"; }

namespace tessel::storage {
namespace {

// Every HDF5 handle the code under test opened has been closed again.
void ExpectNoOpenHandles() { EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0); }

using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::SmallGraph;

// Raw HDF5 edits (independent of the code under test) used to damage a valid file.
class RawEdit {
 public:
  explicit RawEdit(const std::string& path) : file_(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)) {
    EXPECT_GE(file_, 0);
  }
  ~RawEdit() { H5Fclose(file_); }
  void Delete(const std::string& path) { ASSERT_GE(H5Ldelete(file_, path.c_str(), H5P_DEFAULT), 0); }
  template <typename T>
  void Replace(const std::string& path, hid_t type, const std::vector<T>& values) {
    Delete(path);
    const hsize_t n = values.size();
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t d = H5Dcreate2(file_, path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    ASSERT_GE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    H5Dclose(d);
    H5Sclose(space);
  }
  void SetStringAttribute(const std::string& object, const std::string& name, const std::string& value) {
    hid_t obj = H5Oopen(file_, object.c_str(), H5P_DEFAULT);
    H5Adelete(obj, name.c_str());
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, value.size());
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, value.data());
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    H5Oclose(obj);
  }
  void SetInt64Attribute(const std::string& object, const std::string& name, int64_t value) {
    hid_t obj = H5Oopen(file_, object.c_str(), H5P_DEFAULT);
    hid_t a = H5Aopen(obj, name.c_str(), H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &value);
    H5Aclose(a);
    H5Oclose(obj);
  }
  // Overwrites element (row, col) of a rank-2 float dataset in place.
  void SetFloat(const std::string& path, hsize_t row, hsize_t col, float value) {
    hid_t d = H5Dopen2(file_, path.c_str(), H5P_DEFAULT);
    hid_t space = H5Dget_space(d);
    const hsize_t start[2] = {row, col}, count[2] = {1, 1};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const hsize_t one = 1;
    hid_t mem = H5Screate_simple(1, &one, nullptr);
    EXPECT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &value), 0);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(d);
  }
  hid_t file() const { return file_; }

 private:
  hid_t file_;
};

class GraphFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // the edits above probe for missing attributes
    path_ = dir_.File("g.h5");
    ASSERT_TRUE(WriteGraph(SmallGraph(), path_).ok());
  }
  // Reads the file and expects kBadData whose message names the file and contains `fragment`.
  void ExpectBadData(const std::string& fragment) {
    Result<HeteroGraph> g = ReadGraph(path_);
    ASSERT_FALSE(g.ok()) << "expected a failure mentioning: " << fragment;
    EXPECT_EQ(g.status().code(), Code::kBadData) << g.status().ToString();
    EXPECT_THAT(g.status().message(), HasSubstr(path_));
    EXPECT_THAT(g.status().message(), HasSubstr(fragment));
    ExpectNoOpenHandles();
  }
  ScratchDir dir_;
  std::string path_;
};

TEST_F(GraphFileTest, RoundTripPreservesEverything) {
  const HeteroGraph want = SmallGraph();
  Result<HeteroGraph> got = ReadGraph(path_);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->name, want.name);
  EXPECT_EQ(got->num_classes, want.num_classes);
  EXPECT_EQ(got->class_names, want.class_names);
  EXPECT_EQ(got->source_fingerprint, want.source_fingerprint);
  ASSERT_EQ(got->node_types.size(), want.node_types.size());
  for (size_t t = 0; t < want.node_types.size(); ++t) {
    const NodeType& a = got->node_types[t];
    const NodeType& b = want.node_types[t];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.count, b.count);
    EXPECT_EQ(a.feature_dim, b.feature_dim);
    EXPECT_EQ(a.features, b.features);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_EQ(a.train_mask, b.train_mask);
    EXPECT_EQ(a.val_mask, b.val_mask);
    EXPECT_EQ(a.test_mask, b.test_mask);
  }
  ASSERT_EQ(got->relations.size(), want.relations.size());
  for (size_t r = 0; r < want.relations.size(); ++r) {
    const Relation& a = got->relations[r];
    const Relation& b = want.relations[r];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.src_type, b.src_type);
    EXPECT_EQ(a.dst_type, b.dst_type);
    EXPECT_EQ(a.src, b.src);
    EXPECT_EQ(a.dst, b.dst);
  }
  EXPECT_EQ(got->num_nodes(), 8);
  EXPECT_EQ(got->num_edges(), 13);
  EXPECT_EQ(got->NodeOffset(1), 5);
}

TEST_F(GraphFileTest, FileLayoutFollowsTheDesign) {
  RawEdit raw(path_);
  for (const char* p : {"/meta", "/nodes/paper/count", "/nodes/paper/features", "/nodes/paper/labels",
                        "/nodes/paper/train", "/nodes/author/count", "/relations/0/src", "/relations/2/dst"}) {
    EXPECT_GT(H5Lexists(raw.file(), p, H5P_DEFAULT), 0) << p;
  }
  hid_t meta = H5Oopen(raw.file(), "/meta", H5P_DEFAULT);
  for (const char* a :
       {"name", "format_version", "node_types", "relation_names", "num_classes", "source_fingerprint"}) {
    EXPECT_GT(H5Aexists(meta, a), 0) << a;
  }
  int64_t version = 0;
  hid_t attr = H5Aopen(meta, "format_version", H5P_DEFAULT);
  H5Aread(attr, H5T_NATIVE_INT64, &version);
  H5Aclose(attr);
  H5Oclose(meta);
  EXPECT_EQ(version, 1);
}

TEST_F(GraphFileTest, FeaturesAreContiguousAndMappableInPlace) {
  haddr_t offset;
  {
    RawEdit raw(path_);
    hid_t d = H5Dopen2(raw.file(), "/nodes/paper/features", H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(d);
    EXPECT_EQ(H5Pget_layout(dcpl), H5D_CONTIGUOUS);
    offset = H5Dget_offset(d);
    H5Pclose(dcpl);
    H5Dclose(d);
  }
  ASSERT_NE(offset, HADDR_UNDEF);
  const std::string bytes = testing::ReadBytes(path_);
  ASSERT_LE(offset + 10 * sizeof(float), bytes.size());
  float values[10];
  std::memcpy(values, bytes.data() + offset, sizeof(values));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(values[i], static_cast<float>(i));
}

TEST(GraphFile, LargeEdgeArraysRoundTripCompressed) {
  ScratchDir dir;
  HeteroGraph g = SmallGraph();
  g.node_types[0].count = 5;
  Relation big;
  big.name = "big";
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    big.src.push_back(static_cast<int64_t>(rng() % 5));
    big.dst.push_back(static_cast<int64_t>(rng() % 5));
  }
  g.relations.push_back(big);
  const std::string path = dir.File("big.h5");
  ASSERT_TRUE(WriteGraph(g, path).ok());
  Result<HeteroGraph> got = ReadGraph(path);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->relations.back().src, big.src);
  EXPECT_EQ(got->relations.back().dst, big.dst);
}

TEST_F(GraphFileTest, OutOfRangeIdNamesDatasetAndIndex) {
  { RawEdit(path_).Replace<int64_t>("/relations/0/dst", H5T_NATIVE_INT64, {0, 1, 9001, 4}); }
  ExpectBadData("/relations/0/dst: id 9001 out of range [0, 5) at index 2");
}

TEST_F(GraphFileTest, NegativeIdIsBadData) {
  { RawEdit(path_).Replace<int64_t>("/relations/1/src", H5T_NATIVE_INT64, {0, 1, -1, 4}); }
  ExpectBadData("/relations/1/src: id -1 out of range [0, 5) at index 2");
}

TEST_F(GraphFileTest, MissingDatasetIsNamed) {
  { RawEdit(path_).Delete("/relations/2/src"); }
  ExpectBadData("/relations/2/src: missing dataset");
}

TEST_F(GraphFileTest, MissingCountIsNamed) {
  { RawEdit(path_).Delete("/nodes/author/count"); }
  ExpectBadData("/nodes/author/count: missing dataset");
}

TEST_F(GraphFileTest, MissingGroupIsNamed) {
  { RawEdit(path_).Delete("/nodes/author"); }
  ExpectBadData("/nodes/author: missing group");
}

TEST_F(GraphFileTest, MissingMetaAttributeIsNamed) {
  {
    RawEdit raw(path_);
    hid_t meta = H5Oopen(raw.file(), "/meta", H5P_DEFAULT);
    H5Adelete(meta, "relation_names");
    H5Oclose(meta);
  }
  ExpectBadData("/meta: missing attribute relation_names");
}

TEST_F(GraphFileTest, SrcDstSizeMismatchIsBadData) {
  { RawEdit(path_).Replace<int64_t>("/relations/0/dst", H5T_NATIVE_INT64, {0, 1, 3}); }
  ExpectBadData("/relations/0/dst: size 3 does not match src size 4");
}

TEST_F(GraphFileTest, LabelsSizeMismatchIsBadData) {
  { RawEdit(path_).Replace<int64_t>("/nodes/paper/labels", H5T_NATIVE_INT64, {0, 1}); }
  ExpectBadData("/nodes/paper/labels: size 2 does not match count 5");
}

TEST_F(GraphFileTest, WrongDtypeIsBadData) {
  { RawEdit(path_).Replace<double>("/relations/0/src", H5T_NATIVE_DOUBLE, {0, 1, 2, 2}); }
  ExpectBadData("/relations/0/src: expected int64, found float64");
}

TEST_F(GraphFileTest, WrongRankIsBadData) {
  {
    RawEdit raw(path_);
    raw.Delete("/nodes/paper/features");
    const hsize_t n = 10;
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t d =
        H5Dcreate2(raw.file(), "/nodes/paper/features", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(space);
  }
  ExpectBadData("/nodes/paper/features: expected rank 2, found rank 1");
}

TEST_F(GraphFileTest, NonFiniteFeatureIsBadDataNamingNodeAndColumn) {
  const std::string clean = testing::ReadBytes(path_);
  const float inf = std::numeric_limits<float>::infinity();
  for (auto [value, name] :
       {std::pair{std::numeric_limits<float>::quiet_NaN(), "NaN"}, {inf, "+Inf"}, {-inf, "-Inf"}}) {
    testing::WriteText(path_, clean);
    { RawEdit(path_).SetFloat("/nodes/paper/features", 3, 1, value); }
    ExpectBadData(StrCat("g.h5: /nodes/paper/features: node paper:3 (global id 3) column 1 is ", name,
                         "; node features must be finite"));
  }
}

TEST(GraphFile, NonFiniteFeaturesAreNotWritten) {
  ScratchDir dir;
  HeteroGraph g = SmallGraph();
  g.node_types[1].feature_dim = 2;
  g.node_types[1].features = {0, 1, -std::numeric_limits<float>::infinity(), 3, 4, 5};
  Status st = WriteGraph(g, dir.File("bad.h5"));
  EXPECT_EQ(st.code(), Code::kBadData);
  EXPECT_THAT(st.message(), HasSubstr("/nodes/author/features: node author:1 (global id 6) column 0 is -Inf"));
  EXPECT_TRUE(dir.List().empty());
}

TEST_F(GraphFileTest, LabelAtOrAboveNumClassesIsBadData) {
  { RawEdit(path_).Replace<int64_t>("/nodes/paper/labels", H5T_NATIVE_INT64, {0, 1, 3, -1, 1}); }
  ExpectBadData("/nodes/paper/labels: label 3 out of range [-1, 3) at index 2");
}

TEST_F(GraphFileTest, MaskValueNotZeroOrOneIsBadData) {
  { RawEdit(path_).Replace<uint8_t>("/nodes/paper/test", H5T_NATIVE_UINT8, {0, 0, 0, 0, 2}); }
  ExpectBadData("/nodes/paper/test: value 2 is not 0 or 1 at index 4");
}

TEST_F(GraphFileTest, MaskOnUnlabelledNodeIsBadData) {
  { RawEdit(path_).Replace<uint8_t>("/nodes/paper/train", H5T_NATIVE_UINT8, {1, 1, 0, 1, 0}); }
  ExpectBadData("/nodes/paper/train: node 3 is in the split but has no label");
}

TEST_F(GraphFileTest, UnknownRelationKindIsBadData) {
  { RawEdit(path_).SetStringAttribute("/relations/1", "kind", "sideways"); }
  ExpectBadData("/relations/1: attribute kind: 'sideways' is not base, inverse or self_loop");
}

TEST_F(GraphFileTest, UnknownNodeTypeInRelationIsBadData) {
  { RawEdit(path_).SetStringAttribute("/relations/0", "src_type", "venue"); }
  ExpectBadData("/relations/0: attribute src_type: unknown node type 'venue'");
}

TEST_F(GraphFileTest, UnsupportedFormatVersionIsBadData) {
  { RawEdit(path_).SetInt64Attribute("/meta", "format_version", 2); }
  ExpectBadData("format_version 2 is not supported");
}

TEST_F(GraphFileTest, ExtraRelationGroupIsBadData) {
  {
    RawEdit raw(path_);
    hid_t g = H5Gcreate2(raw.file(), "/relations/3", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
  }
  ExpectBadData("/relations: holds 4 entries but /meta lists 3 relation_names");
}

TEST_F(GraphFileTest, TruncatedFileIsBadData) {
  const std::string bytes = testing::ReadBytes(path_);
  for (size_t keep : {bytes.size() / 2, bytes.size() - 100, size_t{1000}, size_t{10}, size_t{0}}) {
    testing::WriteText(path_, bytes.substr(0, keep));
    Result<HeteroGraph> g = ReadGraph(path_);
    ASSERT_FALSE(g.ok()) << "kept " << keep << " bytes";
    EXPECT_EQ(g.status().code(), Code::kBadData) << g.status().ToString();
    EXPECT_THAT(g.status().message(), HasSubstr(path_));
    ExpectNoOpenHandles();
  }
}

TEST_F(GraphFileTest, RandomBytesAreBadData) {
  std::mt19937 rng(42);
  std::string junk(64 * 1024, '\0');
  for (auto& c : junk) c = static_cast<char>(rng());
  testing::WriteText(path_, junk);
  Result<HeteroGraph> g = ReadGraph(path_);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kBadData);
  EXPECT_THAT(g.status().message(), HasSubstr("not an HDF5 file"));
}

// Garbage in the data region after a valid superblock must give an error or a valid graph, never a crash.
TEST_F(GraphFileTest, CorruptedBytesNeverCrash) {
  const std::string good = testing::ReadBytes(path_);
  std::mt19937 rng(1);
  int failures = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = good;
    const size_t start = 64 + rng() % (bad.size() - 64);
    for (size_t i = start; i < std::min(bad.size(), start + 16); ++i) bad[i] = static_cast<char>(rng());
    testing::WriteText(path_, bad);
    Result<HeteroGraph> g = ReadGraph(path_);
    if (!g.ok()) {
      ++failures;
      EXPECT_EQ(g.status().code(), Code::kBadData) << g.status().ToString();
    } else {
      EXPECT_TRUE(g->Validate().ok());
    }
    ExpectNoOpenHandles();
  }
  EXPECT_GT(failures, 0);
}

TEST(GraphFile, MissingFileIsBadData) {
  Result<HeteroGraph> g = ReadGraph("/nonexistent/g.h5");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kBadData);
  EXPECT_THAT(g.status().message(), HasSubstr("/nonexistent/g.h5: cannot open"));
}

TEST(GraphFile, InvalidGraphIsNotWritten) {
  ScratchDir dir;
  HeteroGraph g = SmallGraph();
  g.relations[0].dst[1] = 5;  // out of range for 5 papers
  Status st = WriteGraph(g, dir.File("bad.h5"));
  EXPECT_EQ(st.code(), Code::kBadData);
  EXPECT_THAT(st.message(), HasSubstr("relation 0 (writes) dst: id 5 out of range [0, 5) at index 1"));
  EXPECT_TRUE(dir.List().empty());
}

TEST(GraphFile, FailedWriteLeavesNoTemporaryFile) {
  ScratchDir dir;
  // The final name is a non-empty directory, so the rename into place fails after the temp file was written.
  std::filesystem::create_directories(dir.path() / "out.h5" / "occupied");
  Status st = WriteGraph(SmallGraph(), dir.File("out.h5"));
  EXPECT_EQ(st.code(), Code::kStorage) << st.ToString();
  ExpectNoOpenHandles();
  EXPECT_EQ(dir.List(), std::vector<std::string>{"out.h5"});
}

TEST(GraphFile, UnwritableDirectoryIsStorageError) {
  Status st = WriteGraph(SmallGraph(), "/nonexistent-dir/g.h5");
  EXPECT_EQ(st.code(), Code::kStorage) << st.ToString();
}

TEST(GraphFile, ValidateNamesRelationAndIndex) {
  HeteroGraph g = SmallGraph();
  EXPECT_TRUE(g.Validate().ok());
  g.relations[2].src[3] = -4;
  Status st = g.Validate();
  EXPECT_EQ(st.code(), Code::kBadData);
  EXPECT_THAT(st.message(), HasSubstr("relation 2 (self_loop) src: id -4 out of range [0, 5) at index 3"));
}

TEST(GraphFile, ValidateRejectsInconsistentSizes) {
  HeteroGraph g = SmallGraph();
  g.node_types[0].features.pop_back();
  EXPECT_EQ(g.Validate().code(), Code::kBadData);
  g = SmallGraph();
  g.node_types[1].name = "a/b";
  EXPECT_EQ(g.Validate().code(), Code::kBadData);
  g = SmallGraph();
  g.relations[0].src_type = 2;
  EXPECT_EQ(g.Validate().code(), Code::kBadData);
  g = SmallGraph();
  g.class_names.pop_back();
  EXPECT_EQ(g.Validate().code(), Code::kBadData);
}

}  // namespace
}  // namespace tessel::storage

// Tests for storage/feature_store.cc (and the finiteness check of storage/feature_check.h): both modes
// serve exactly ReadGraph's rows, a non-served id is an error, and every malformed features dataset is
// refused with kBadData naming the file and the dataset.
#include "storage/feature_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "core/logging.h"
#include "storage/feature_check.h"
#include "storage/graph.h"
#include "tests/unit/storage/test_util.h"

namespace tessel::storage {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;
using Mode = FeatureStore::Mode;

constexpr int64_t kPapers = 40, kAuthors = 25, kVenues = 3, kDim = 4;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// paper (40 nodes) and author (25) with 4-wide features, venue (3) without: global ids 0-39, 40-64, 65-67.
HeteroGraph ThreeTypeGraph() {
  HeteroGraph g;
  g.name = "fs";
  g.source_fingerprint = "test";
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (auto [name, count, dim] :
       {std::tuple{"paper", kPapers, kDim}, {"author", kAuthors, kDim}, {"venue", kVenues, 0}}) {
    NodeType t;
    t.name = name;
    t.count = count;
    t.feature_dim = dim;
    for (int64_t i = 0; i < count * dim; ++i) t.features.push_back(normal(rng));
    g.node_types.push_back(t);
  }
  Relation writes;
  writes.name = "writes";
  writes.src_type = 1;
  writes.dst_type = 0;
  writes.src = {0, 1, 24};
  writes.dst = {0, 5, 39};
  g.relations = {writes};
  return g;
}

// Every HDF5 handle the code under test opened has been closed again.
void ExpectNoOpenHandles() { EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0); }

// Raw HDF5 edits (independent of the code under test) that make a valid file bad.
class RawFile {
 public:
  explicit RawFile(const std::string& path) : file_(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)) {
    EXPECT_GE(file_, 0);
  }
  ~RawFile() { H5Fclose(file_); }
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;

  // Replaces `path` with a dataset of file type `type` and shape `dims`, written from `data` (of memory
  // type `mem`, or left unwritten when null), with the creation properties `dcpl`.
  void Replace(const std::string& path, hid_t type, const std::vector<hsize_t>& dims, hid_t dcpl, hid_t mem,
               const void* data) {
    H5Ldelete(file_, path.c_str(), H5P_DEFAULT);
    hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t d = H5Dcreate2(file_, path.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    if (data != nullptr) {
      ASSERT_GE(H5Dwrite(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0);
    }
    H5Dclose(d);
    H5Sclose(space);
  }
  // Overwrites one element of a rank-2 float dataset in place.
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

 private:
  hid_t file_;
};

class PropertyList {
 public:
  PropertyList() : id_(H5Pcreate(H5P_DATASET_CREATE)) {}
  ~PropertyList() { H5Pclose(id_); }
  PropertyList(const PropertyList&) = delete;
  PropertyList& operator=(const PropertyList&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
};

// Counts what the store allocates and frees through it.
class CountingAllocator final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes) override {
    ++allocations;
    allocated_bytes += bytes;
    return HostAllocator().Allocate(bytes);
  }
  void Free(void* ptr) override {
    ++frees;
    HostAllocator().Free(ptr);
  }
  Device device() const override { return Device::kCpu; }
  std::string_view name() const override { return "counting"; }
  int allocations = 0, frees = 0;
  size_t allocated_bytes = 0;
};

FeatureStore::Options WithMode(Mode mode) {
  FeatureStore::Options options;
  options.mode = mode;
  return options;
}

class FeatureStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    graph_ = ThreeTypeGraph();
    path_ = dir_.File("g.h5");
    ASSERT_TRUE(WriteGraph(graph_, path_).ok());
  }

  // Opening over `owned` fails in both modes with kBadData whose message names the file, `dataset` and `fragment`.
  void ExpectRefused(const std::vector<int64_t>& owned, const std::string& dataset, const std::string& fragment) {
    for (Mode mode : {Mode::kMapped, Mode::kPinned}) {
      SCOPED_TRACE(mode == Mode::kMapped ? "mapped" : "pinned");
      Result<FeatureStore> store = FeatureStore::Open(path_, owned, WithMode(mode));
      ASSERT_FALSE(store.ok()) << "expected a refusal mentioning: " << fragment;
      EXPECT_EQ(store.status().code(), Code::kBadData) << store.status().ToString();
      EXPECT_EQ(store.status().exit_code(), 3);
      EXPECT_THAT(store.status().message(), HasSubstr(path_ + ": " + dataset + ": "));
      EXPECT_THAT(store.status().message(), HasSubstr(fragment));
      ExpectNoOpenHandles();
    }
  }

  // Every id, features of paper and author only (the default owned set of the refusal tests).
  static std::vector<int64_t> AllFeatureIds() {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < kPapers + kAuthors; ++i) ids.push_back(i);
    return ids;
  }

  void ReplacePaperFeatures(hid_t type, const std::vector<hsize_t>& dims, hid_t dcpl, hid_t mem, const void* data) {
    RawFile(path_).Replace("/nodes/paper/features", type, dims, dcpl, mem, data);
  }

  ScratchDir dir_;
  HeteroGraph graph_;
  std::string path_;
};

// ---- serving rows ---------------------------------------------------------------------------------

TEST_F(FeatureStoreTest, BothModesServeExactlyTheRowsOfReadGraph) {
  Result<HeteroGraph> g = ReadGraph(path_);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> owned;
    for (int64_t id = 0; id < kPapers + kAuthors; ++id) {
      if (rng() % 3 == 0) owned.push_back(id);
    }
    for (Mode mode : {Mode::kMapped, Mode::kPinned}) {
      SCOPED_TRACE(::testing::Message() << "trial " << trial << (mode == Mode::kMapped ? " mapped" : " pinned"));
      FeatureStore::Options options = WithMode(mode);
      options.cuda_access = FeatureStore::CudaAccess::kRegisterMappedTables;  // a no-op without a GPU
      Result<FeatureStore> store = FeatureStore::Open(path_, owned, options);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      EXPECT_EQ(store->feature_dim(), kDim);
      EXPECT_EQ(store->num_rows(), static_cast<int64_t>(owned.size()));
      EXPECT_EQ(store->owned_ids(), owned);
      std::vector<float> gathered(owned.size() * kDim);
      ASSERT_TRUE(store->Gather(owned.data(), static_cast<int64_t>(owned.size()), gathered.data()).ok());
      for (size_t i = 0; i < owned.size(); ++i) {
        const int64_t id = owned[i];
        const int32_t type = id < kPapers ? 0 : 1;
        const float* want = g->node_types[type].features.data() + (id - g->NodeOffset(type)) * kDim;
        const float* row = store->Row(id);
        ASSERT_NE(row, nullptr) << id;
        for (int64_t c = 0; c < kDim; ++c) {
          EXPECT_EQ(row[c], want[c]) << "node " << id << " column " << c;
          EXPECT_EQ(gathered[i * kDim + c], want[c]) << "node " << id << " column " << c;
        }
        const FeatureStore::RowRef ref = store->Locate(id);
        ASSERT_TRUE(ref.found());
        EXPECT_EQ(store->table(ref.table).data + ref.row * kDim, row);
        EXPECT_LT(ref.row, store->table(ref.table).rows);
        const int64_t want_row = mode == Mode::kPinned ? static_cast<int64_t>(i) : id - g->NodeOffset(type);
        EXPECT_EQ(ref.row, want_row);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(row) % alignof(float), 0u);
      }
    }
  }
  ExpectNoOpenHandles();
}

TEST_F(FeatureStoreTest, OneTableGivesABasePointerAndRowIndex) {
  const std::vector<int64_t> authors = {41, 42, 50, 64};  // author 1, 2, 10, 24
  for (Mode mode : {Mode::kMapped, Mode::kPinned}) {
    Result<FeatureStore> store = FeatureStore::Open(path_, authors, WithMode(mode));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_EQ(store->num_tables(), 1);
    ASSERT_NE(store->base(), nullptr);
    for (int64_t id : authors) EXPECT_EQ(store->base() + store->RowIndex(id) * kDim, store->Row(id));
  }
  // Rows in two mapped node types: two tables and no single base.
  Result<FeatureStore> both = FeatureStore::Open(path_, {3, 41}, WithMode(Mode::kMapped));
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(both->num_tables(), 2);
  EXPECT_EQ(both->base(), nullptr);
  EXPECT_NE(both->Locate(3).table, both->Locate(41).table);
  Result<FeatureStore> pinned = FeatureStore::Open(path_, {3, 41}, WithMode(Mode::kPinned));
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->num_tables(), 1);
  EXPECT_EQ(pinned->RowIndex(41), 1);
}

TEST_F(FeatureStoreTest, AnIdNotServedIsAnErrorNotACrash) {
  for (Mode mode : {Mode::kMapped, Mode::kPinned}) {
    Result<FeatureStore> store = FeatureStore::Open(path_, {1, 2, 45}, WithMode(mode));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (int64_t id : {int64_t{0}, int64_t{3}, int64_t{44}, int64_t{66}, int64_t{-1}, int64_t{1} << 40}) {
      EXPECT_EQ(store->Row(id), nullptr) << id;
      EXPECT_FALSE(store->Locate(id).found()) << id;
      EXPECT_EQ(store->RowIndex(id), -1) << id;
      Result<const float*> row = store->CheckedRow(id);
      ASSERT_FALSE(row.ok()) << id;
      EXPECT_EQ(row.status().code(), Code::kInternal);
      EXPECT_THAT(row.status().message(), HasSubstr(StrCat("node id ", id, " is not one of the 3 rows")));
    }
    std::vector<float> out(3 * kDim);
    const int64_t ids[3] = {2, 45, 7};
    Status st = store->Gather(ids, 3, out.data());
    EXPECT_EQ(st.code(), Code::kInternal);
    EXPECT_THAT(st.message(), HasSubstr("node id 7 at index 2 is not one of the 3 rows"));
  }
}

TEST_F(FeatureStoreTest, PinnedRowsComeFromTheCallersAllocator) {
  CountingAllocator allocator;
  {
    FeatureStore::Options options = WithMode(Mode::kPinned);
    options.allocator = &allocator;
    Result<FeatureStore> store = FeatureStore::Open(path_, {0, 1, 2, 40, 64}, options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ(allocator.allocations, 1);
    EXPECT_EQ(allocator.allocated_bytes, 5 * kDim * sizeof(float));
    EXPECT_EQ(store->bytes(), static_cast<int64_t>(5 * kDim * sizeof(float)));
    // Moving hands the buffer over; only the last owner frees it.
    FeatureStore moved = std::move(*store);
    EXPECT_EQ(store->num_rows(), 0);
    EXPECT_EQ(store->Row(0), nullptr);
    EXPECT_EQ(moved.Row(40)[0], graph_.node_types[1].features[0]);
    FeatureStore assigned = std::move(moved);
    EXPECT_EQ(assigned.Row(2)[1], graph_.node_types[0].features[2 * kDim + 1]);
    EXPECT_EQ(allocator.frees, 0);
  }
  EXPECT_EQ(allocator.frees, 1);
}

TEST_F(FeatureStoreTest, MappedTablesSurviveAMove) {
  Result<FeatureStore> store = FeatureStore::Open(path_, {5, 60}, WithMode(Mode::kMapped));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  FeatureStore moved = std::move(*store);
  EXPECT_EQ(store->num_tables(), 0);
  EXPECT_EQ(moved.Row(60)[3], graph_.node_types[1].features[20 * kDim + 3]);
  EXPECT_GT(moved.bytes(), 0);
}

TEST_F(FeatureStoreTest, AnEmptyOwnedSetOpens) {
  for (Mode mode : {Mode::kMapped, Mode::kPinned}) {
    Result<FeatureStore> store = FeatureStore::Open(path_, {}, WithMode(mode));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ(store->num_rows(), 0);
    EXPECT_EQ(store->feature_dim(), kDim);
    EXPECT_EQ(store->num_tables(), 0);
    EXPECT_EQ(store->Row(0), nullptr);
  }
}

TEST_F(FeatureStoreTest, UnsortedOrRepeatedOwnedIdsAreTheCallersBug) {
  for (const std::vector<int64_t>& owned : {std::vector<int64_t>{3, 1}, {1, 1}, {-2, 4}}) {
    Result<FeatureStore> store = FeatureStore::Open(path_, owned, WithMode(Mode::kPinned));
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), Code::kInternal) << store.status().ToString();
  }
}

TEST_F(FeatureStoreTest, WrittenFeaturesAreAlignedForMapping) {
  hid_t file = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  for (const char* p : {"/nodes/paper/features", "/nodes/author/features"}) {
    hid_t d = H5Dopen2(file, p, H5P_DEFAULT);
    EXPECT_EQ(H5Dget_offset(d) % 64, 0u) << p;
    H5Dclose(d);
  }
  H5Fclose(file);
}

// ---- refusals ---------------------------------------------------------------------------------------

TEST_F(FeatureStoreTest, ChunkedFeaturesAreRefusedInBothModes) {
  PropertyList dcpl;
  const hsize_t chunk[2] = {8, kDim};
  H5Pset_chunk(dcpl.get(), 2, chunk);
  ReplacePaperFeatures(H5T_IEEE_F32LE, {kPapers, kDim}, dcpl.get(), H5T_NATIVE_FLOAT,
                       graph_.node_types[0].features.data());
  ExpectRefused(AllFeatureIds(), "/nodes/paper/features", "layout is chunked");
  ExpectRefused(AllFeatureIds(), "/nodes/paper/features", "h5repack -l /nodes/paper/features:CONTI");
  // Even a worker that owns no paper refuses the file: every worker applies the same rule.
  ExpectRefused({41}, "/nodes/paper/features", "needs a contiguous dataset");
}

TEST_F(FeatureStoreTest, CompactFeaturesAreRefused) {
  PropertyList dcpl;
  H5Pset_layout(dcpl.get(), H5D_COMPACT);
  ReplacePaperFeatures(H5T_IEEE_F32LE, {kPapers, kDim}, dcpl.get(), H5T_NATIVE_FLOAT,
                       graph_.node_types[0].features.data());
  ExpectRefused(AllFeatureIds(), "/nodes/paper/features", "layout is compact");
}

TEST_F(FeatureStoreTest, Float64FeaturesAreRefused) {
  std::vector<double> values(kPapers * kDim, 0.5);
  ReplacePaperFeatures(H5T_IEEE_F64LE, {kPapers, kDim}, H5P_DEFAULT, H5T_NATIVE_DOUBLE, values.data());
  ExpectRefused(AllFeatureIds(), "/nodes/paper/features", "element type is float64");
}

TEST_F(FeatureStoreTest, IntegerFeaturesAreRefused) {
  std::vector<int32_t> values(kPapers * kDim, 1);
  ReplacePaperFeatures(H5T_STD_I32LE, {kPapers, kDim}, H5P_DEFAULT, H5T_NATIVE_INT32, values.data());
  ExpectRefused(AllFeatureIds(), "/nodes/paper/features", "element type is int32");
}

TEST_F(FeatureStoreTest, BigEndianFeaturesAreRefused) {
  ReplacePaperFeatures(H5T_IEEE_F32BE, {kPapers, kDim}, H5P_DEFAULT, H5T_NATIVE_FLOAT,
                       graph_.node_types[0].features.data());
  ExpectRefused(AllFeatureIds(), "/nodes/paper/features", "element type is float32 (big-endian)");
}

TEST_F(FeatureStoreTest, RowCountNotMatchingCountIsRefused) {
  ReplacePaperFeatures(H5T_IEEE_F32LE, {kPapers - 1, kDim}, H5P_DEFAULT, H5T_NATIVE_FLOAT,
                       graph_.node_types[0].features.data());
  ExpectRefused(AllFeatureIds(), "/nodes/paper/features", "shape [39, 4] does not match /nodes/paper/count 40");
}

TEST_F(FeatureStoreTest, WrongRankIsRefused) {
  ReplacePaperFeatures(H5T_IEEE_F32LE, {kPapers * kDim}, H5P_DEFAULT, H5T_NATIVE_FLOAT,
                       graph_.node_types[0].features.data());
  ExpectRefused(AllFeatureIds(), "/nodes/paper/features", "expected rank 2 [count, width], found rank 1");
  ReplacePaperFeatures(H5T_IEEE_F32LE, {kPapers, 2, 2}, H5P_DEFAULT, H5T_NATIVE_FLOAT,
                       graph_.node_types[0].features.data());
  ExpectRefused(AllFeatureIds(), "/nodes/paper/features", "found rank 3");
}

TEST_F(FeatureStoreTest, UnallocatedFeaturesAreRefused) {
  PropertyList dcpl;
  H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS);
  H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_LATE);
  ReplacePaperFeatures(H5T_IEEE_F32LE, {kPapers, kDim}, dcpl.get(), H5T_NATIVE_FLOAT, nullptr);
  ExpectRefused(AllFeatureIds(), "/nodes/paper/features", "no storage is allocated");
}

TEST_F(FeatureStoreTest, WidthsThatDifferBetweenTypesAreRefused) {
  std::vector<float> values(kPapers * 5, 1.0f);
  ReplacePaperFeatures(H5T_IEEE_F32LE, {kPapers, 5}, H5P_DEFAULT, H5T_NATIVE_FLOAT, values.data());
  ExpectRefused(AllFeatureIds(), "/nodes/author/features", "width 4 differs from /nodes/paper/features width 5");
}

TEST_F(FeatureStoreTest, NonFiniteOwnedRowsAreRefusedNamingNodeAndColumn) {
  const std::string clean = testing::ReadBytes(path_);
  struct Case {
    int64_t type_row;
    const char* type;
    float value;
    const char* want;
  };
  for (const Case& c : {Case{7, "paper", kNaN, "node paper:7 (global id 7) column 2 is NaN"},
                        Case{3, "author", kInf, "node author:3 (global id 43) column 2 is +Inf"},
                        Case{24, "author", -kInf, "node author:24 (global id 64) column 2 is -Inf"}}) {
    SCOPED_TRACE(c.want);
    testing::WriteText(path_, clean);
    RawFile(path_).SetFloat(StrCat("/nodes/", c.type, "/features"), static_cast<hsize_t>(c.type_row), 2, c.value);
    ExpectRefused(AllFeatureIds(), StrCat("/nodes/", c.type, "/features"), c.want);
    ExpectRefused({1, 2, 7, 43, 64}, StrCat("/nodes/", c.type, "/features"), "node features must be finite");
    // A worker that does not hold the bad row is not concerned by it.
    for (Mode mode : {Mode::kMapped, Mode::kPinned}) {
      Result<FeatureStore> store = FeatureStore::Open(path_, {0, 1, 42, 50}, WithMode(mode));
      EXPECT_TRUE(store.ok()) << store.status().ToString();
    }
  }
}

TEST_F(FeatureStoreTest, AnOwnedNodeOfATypeWithoutFeaturesIsRefused) {
  ExpectRefused({3, 66}, "/nodes/venue/features",
                "missing, but this worker serves node venue:1 (global id 66); every node type a worker serves needs "
                "features");
  Result<FeatureStore> store = FeatureStore::Open(path_, {3, 64}, WithMode(Mode::kMapped));
  EXPECT_TRUE(store.ok()) << store.status().ToString();
}

TEST_F(FeatureStoreTest, AnOwnedIdBeyondTheFileIsRefused) {
  Result<FeatureStore> store = FeatureStore::Open(path_, {3, 68}, WithMode(Mode::kPinned));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kBadData);
  EXPECT_THAT(store.status().message(), HasSubstr(path_ + ": node id 68 is beyond the file's 68 nodes"));
}

TEST_F(FeatureStoreTest, MisalignedFeaturesAreServedPinnedButNotMapped) {
  // Without 64-byte alignment HDF5 packs raw data back to back: 3 bytes before the features misalign them.
  const std::string path = dir_.File("packed.h5");
  {
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    hid_t meta = H5Gcreate2(file, "meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const int64_t version = kGraphFormatVersion;
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(meta, "format_version", H5T_NATIVE_INT64, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &version);
    H5Aclose(a);
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 6);
    const hsize_t one = 1;
    hid_t names_space = H5Screate_simple(1, &one, nullptr);
    a = H5Acreate2(meta, "node_types", str, names_space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, str, "paper");
    H5Aclose(a);
    H5Sclose(names_space);
    H5Tclose(str);
    H5Gclose(meta);
    hid_t nodes = H5Gcreate2(file, "nodes", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t paper = H5Gcreate2(nodes, "paper", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t d = H5Dcreate2(paper, "count", H5T_NATIVE_INT64, scalar, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &kPapers);
    H5Dclose(d);
    PropertyList early;
    H5Pset_layout(early.get(), H5D_CONTIGUOUS);
    H5Pset_alloc_time(early.get(), H5D_ALLOC_TIME_EARLY);
    const hsize_t three = 3;
    hid_t pad_space = H5Screate_simple(1, &three, nullptr);
    d = H5Dcreate2(paper, "pad", H5T_NATIVE_UINT8, pad_space, H5P_DEFAULT, early.get(), H5P_DEFAULT);
    const uint8_t pad[3] = {1, 2, 3};
    H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, pad);
    H5Dclose(d);
    H5Sclose(pad_space);
    const hsize_t dims[2] = {kPapers, kDim};
    hid_t space = H5Screate_simple(2, dims, nullptr);
    d = H5Dcreate2(paper, "features", H5T_IEEE_F32LE, space, H5P_DEFAULT, early.get(), H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, graph_.node_types[0].features.data());
    const haddr_t offset = H5Dget_offset(d);
    H5Dclose(d);
    H5Sclose(space);
    H5Sclose(scalar);
    H5Gclose(paper);
    H5Gclose(nodes);
    H5Fclose(file);
    ASSERT_NE(offset % 4, 0u) << "the premise: HDF5 placed the features at an odd offset";
  }
  Result<FeatureStore> pinned = FeatureStore::Open(path, {0, 17, 39}, WithMode(Mode::kPinned));
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  EXPECT_EQ(pinned->Row(17)[2], graph_.node_types[0].features[17 * kDim + 2]);
  Result<FeatureStore> mapped = FeatureStore::Open(path, {0, 17, 39}, WithMode(Mode::kMapped));
  ASSERT_FALSE(mapped.ok());
  EXPECT_EQ(mapped.status().code(), Code::kBadData);
  EXPECT_THAT(mapped.status().message(), HasSubstr(path + ": /nodes/paper/features: data starts at byte "));
  EXPECT_THAT(mapped.status().message(), HasSubstr("not a multiple of 4"));
  ExpectNoOpenHandles();
}

TEST_F(FeatureStoreTest, MissingForeignAndTruncatedFilesAreBadData) {
  const std::string clean = testing::ReadBytes(path_);
  std::vector<std::pair<std::string, std::string>> cases = {{dir_.File("absent.h5"), "cannot open"}};
  testing::WriteText(dir_.File("noise.h5"), std::string(4096, 'x'));
  cases.emplace_back(dir_.File("noise.h5"), "not an HDF5 file");
  testing::WriteText(dir_.File("cut.h5"), clean.substr(0, clean.size() - 200));
  cases.emplace_back(dir_.File("cut.h5"), "");
  for (const auto& [file, fragment] : cases) {
    for (Mode mode : {Mode::kMapped, Mode::kPinned}) {
      Result<FeatureStore> store = FeatureStore::Open(file, {0, 1}, WithMode(mode));
      ASSERT_FALSE(store.ok()) << file;
      EXPECT_EQ(store.status().code(), Code::kBadData) << store.status().ToString();
      EXPECT_THAT(store.status().message(), HasSubstr(file + ": " + fragment));
      ExpectNoOpenHandles();
    }
  }
}

// ---- the finiteness check -------------------------------------------------------------------------

TEST(FeatureCheck, FirstNonFiniteFindsTheFirstAcrossBlocks) {
  std::vector<float> v(5000, 1.0f);
  v[10] = std::numeric_limits<float>::max();
  v[11] = std::numeric_limits<float>::denorm_min();
  v[12] = -0.0f;
  EXPECT_EQ(FirstNonFinite(v.data(), static_cast<int64_t>(v.size())), -1);
  v[4500] = kNaN;
  EXPECT_EQ(FirstNonFinite(v.data(), static_cast<int64_t>(v.size())), 4500);
  v[4097] = -kInf;
  EXPECT_EQ(FirstNonFinite(v.data(), static_cast<int64_t>(v.size())), 4097);
  v[0] = kInf;
  EXPECT_EQ(FirstNonFinite(v.data(), static_cast<int64_t>(v.size())), 0);
  EXPECT_EQ(FirstNonFinite(v.data() + 1, 3), -1);
  EXPECT_EQ(FirstNonFinite(v.data(), 0), -1);
}

}  // namespace
}  // namespace tessel::storage

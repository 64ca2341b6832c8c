#include "storage/partition.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace tessel::storage {
namespace {

NodeType MakeType(const std::string& name, int64_t count, int64_t feature_dim) {
  NodeType t;
  t.name = name;
  t.count = count;
  t.feature_dim = feature_dim;
  return t;
}

Relation MakeRelation(const std::string& name, int32_t src_type, int32_t dst_type) {
  Relation r;
  r.name = name;
  r.src_type = src_type;
  r.dst_type = dst_type;
  return r;
}

// A heterogeneous graph with two node types, three relations (one with duplicate edges and self
// loops), features of a common width, and labels/masks on the first type only.
HeteroGraph MixedGraph(uint64_t seed, int64_t feature_dim_b = 3) {
  std::mt19937_64 rng(seed);
  HeteroGraph g;
  g.name = "mixed";
  g.num_classes = 3;
  NodeType a = MakeType("paper", 40, 3);
  NodeType b = MakeType("author", 25, feature_dim_b);
  for (NodeType* t : {&a, &b}) {
    t->features.resize(t->count * t->feature_dim);
    for (size_t i = 0; i < t->features.size(); ++i) t->features[i] = static_cast<float>(rng() % 1000) / 7.0f;
  }
  a.labels.resize(a.count);
  a.train_mask.resize(a.count);
  a.val_mask.resize(a.count);
  a.test_mask.resize(a.count);
  for (int64_t i = 0; i < a.count; ++i) {
    a.labels[i] = (i % 5 == 4) ? -1 : static_cast<int64_t>(rng() % 3);
    const bool labelled = a.labels[i] >= 0;  // only labelled nodes may be in a split
    a.train_mask[i] = labelled && i % 3 == 0;
    a.val_mask[i] = labelled && i % 3 == 1;
    a.test_mask[i] = labelled && i % 3 == 2;
  }
  g.node_types = {a, b};
  Relation cites = MakeRelation("cites", 0, 0);
  Relation writes = MakeRelation("writes", 1, 0);
  Relation knows = MakeRelation("knows", 1, 1);
  for (int i = 0; i < 150; ++i) {
    cites.src.push_back(static_cast<int64_t>(rng() % 40));
    cites.dst.push_back(static_cast<int64_t>(rng() % 40));
  }
  cites.src.insert(cites.src.end(), {3, 3, 7});  // a duplicate pair and a self loop
  cites.dst.insert(cites.dst.end(), {5, 5, 7});
  for (int i = 0; i < 80; ++i) {
    writes.src.push_back(static_cast<int64_t>(rng() % 25));
    writes.dst.push_back(static_cast<int64_t>(rng() % 40));
  }
  for (int i = 0; i < 30; ++i) {
    knows.src.push_back(static_cast<int64_t>(rng() % 25));
    knows.dst.push_back(static_cast<int64_t>(rng() % 25));
  }
  g.relations = {cites, writes, knows};
  return g;
}

std::vector<int32_t> RandomParts(int64_t n, int32_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> part_of(n);
  for (auto& p : part_of) p = static_cast<int32_t>(rng() % k);
  return part_of;
}

bool SamePartition(const WorkerPartition& a, const WorkerPartition& b) {
  return a.part == b.part && a.num_parts == b.num_parts && a.offsets == b.offsets && a.num_owned == b.num_owned &&
         a.row_new_id == b.row_new_id && a.row_orig_id == b.row_orig_id && a.relation_names == b.relation_names &&
         a.rel_ptr == b.rel_ptr && a.src == b.src && a.dst == b.dst && a.feature_dim == b.feature_dim &&
         a.features == b.features && a.labels == b.labels && a.train_mask == b.train_mask && a.val_mask == b.val_mask &&
         a.test_mask == b.test_mask && a.total_nodes == b.total_nodes && a.num_classes == b.num_classes &&
         a.total_train == b.total_train && a.total_test == b.total_test && a.type_offsets == b.type_offsets;
}

// Recounts everything from the graph and `part_of` and compares with what BuildWorkerPartitions made.
void CheckAgainstRecount(const HeteroGraph& g, const std::vector<int32_t>& part_of, int32_t k,
                         const std::vector<WorkerPartition>& parts) {
  const int64_t n = g.num_nodes();
  ASSERT_EQ(parts.size(), static_cast<size_t>(k));
  // The new id of g is its rank in the order (part, g).
  std::vector<std::pair<int32_t, int64_t>> order;
  for (int64_t v = 0; v < n; ++v) order.emplace_back(part_of[v], v);
  std::sort(order.begin(), order.end());
  std::vector<int64_t> expected_new(n);
  for (int64_t i = 0; i < n; ++i) expected_new[order[i].second] = i;

  std::vector<int64_t> type_of(n), local_of(n);
  for (int32_t t = 0; t < static_cast<int32_t>(g.node_types.size()); ++t) {
    for (int64_t i = 0; i < g.node_types[t].count; ++i) {
      type_of[g.NodeOffset(t) + i] = t;
      local_of[g.NodeOffset(t) + i] = i;
    }
  }
  int64_t train = 0, test = 0;
  for (int64_t v = 0; v < n; ++v) {
    const NodeType& t = g.node_types[type_of[v]];
    if (t.labels.empty() || t.labels[local_of[v]] < 0) continue;
    train += t.train_mask[local_of[v]];
    test += t.test_mask[local_of[v]];
  }

  int64_t owned_total = 0;
  for (int32_t p = 0; p < k; ++p) {
    SCOPED_TRACE("part " + std::to_string(p));
    const WorkerPartition& wp = parts[p];
    ASSERT_TRUE(ValidatePartition(wp).ok()) << ValidatePartition(wp).ToString();
    EXPECT_EQ(wp.part, p);
    EXPECT_EQ(wp.num_parts, k);
    EXPECT_EQ(wp.offsets, parts[0].offsets);
    EXPECT_EQ(wp.total_nodes, n);
    EXPECT_EQ(wp.num_classes, g.num_classes);
    EXPECT_EQ(wp.total_train, train);
    EXPECT_EQ(wp.total_test, test);
    owned_total += wp.num_owned;

    // Owned rows: exactly the nodes of part p, ascending by original id, with the expected new ids.
    std::vector<int64_t> mine;
    for (int64_t v = 0; v < n; ++v) {
      if (part_of[v] == p) mine.push_back(v);
    }
    ASSERT_EQ(wp.num_owned, static_cast<int64_t>(mine.size()));
    for (int64_t i = 0; i < wp.num_owned; ++i) {
      EXPECT_EQ(wp.row_orig_id[i], mine[i]);
      EXPECT_EQ(wp.row_new_id[i], expected_new[mine[i]]);
    }
    // Every row's new id is the one the global order gives its original id.
    for (int64_t i = 0; i < wp.num_rows(); ++i) EXPECT_EQ(wp.row_new_id[i], expected_new[wp.row_orig_id[i]]);

    // Edges: the multiset of (relation, src, dst) with dst in p, exactly once each.
    std::vector<std::tuple<int, int64_t, int64_t>> want, got;
    std::set<int64_t> want_halo;
    for (int r = 0; r < static_cast<int>(g.relations.size()); ++r) {
      const Relation& rel = g.relations[r];
      for (size_t e = 0; e < rel.src.size(); ++e) {
        const int64_t s = g.NodeOffset(rel.src_type) + rel.src[e], d = g.NodeOffset(rel.dst_type) + rel.dst[e];
        if (part_of[d] != p) continue;
        want.emplace_back(r, s, d);
        if (part_of[s] != p) want_halo.insert(s);
      }
    }
    ASSERT_EQ(wp.relation_names.size(), g.relations.size());
    for (int r = 0; r < wp.num_relations(); ++r) {
      EXPECT_EQ(wp.relation_names[r], g.relations[r].name);
      for (int64_t e = wp.rel_ptr[r]; e < wp.rel_ptr[r + 1]; ++e) {
        ASSERT_LT(wp.dst[e], wp.num_owned);
        got.emplace_back(r, wp.row_orig_id[wp.src[e]], wp.row_orig_id[wp.dst[e]]);
        if (e > wp.rel_ptr[r]) {
          EXPECT_LE(std::pair(wp.src[e - 1], wp.dst[e - 1]), std::pair(wp.src[e], wp.dst[e]));
        }
      }
    }
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);

    // Halo: exactly the non-owned sources, sorted by new id.
    std::set<int64_t> got_halo(wp.row_orig_id.begin() + wp.num_owned, wp.row_orig_id.end());
    EXPECT_EQ(got_halo, want_halo);
    EXPECT_EQ(static_cast<size_t>(wp.num_rows() - wp.num_owned), want_halo.size());
    for (int64_t i = wp.num_owned + 1; i < wp.num_rows(); ++i) EXPECT_LT(wp.row_new_id[i - 1], wp.row_new_id[i]);

    // Features and supervision of the owned rows only (a halo row's features are its owner's).
    if (wp.feature_dim > 0) {
      ASSERT_EQ(static_cast<int64_t>(wp.features.size()), wp.num_owned * wp.feature_dim);
      for (int64_t i = 0; i < wp.num_owned; ++i) {
        const int64_t v = wp.row_orig_id[i];
        const NodeType& t = g.node_types[type_of[v]];
        for (int64_t j = 0; j < wp.feature_dim; ++j) {
          ASSERT_EQ(wp.features[i * wp.feature_dim + j], t.features[local_of[v] * t.feature_dim + j]);
        }
      }
    }
    for (int64_t i = 0; i < wp.num_owned; ++i) {
      const int64_t v = wp.row_orig_id[i];
      const NodeType& t = g.node_types[type_of[v]];
      EXPECT_EQ(wp.labels[i], t.labels.empty() ? -1 : t.labels[local_of[v]]);
      EXPECT_EQ(wp.train_mask[i], t.train_mask.empty() ? 0 : t.train_mask[local_of[v]]);
      EXPECT_EQ(wp.test_mask[i], t.test_mask.empty() ? 0 : t.test_mask[local_of[v]]);
    }
  }
  EXPECT_EQ(owned_total, n);
  EXPECT_EQ(parts[0].offsets.front(), 0);
  EXPECT_EQ(parts[0].offsets.back(), n);
}

TEST(BuildWorkerPartitions, MatchesAnIndependentRecount) {
  const HeteroGraph g = MixedGraph(1);
  ASSERT_TRUE(g.Validate().ok()) << g.Validate().ToString();
  for (int32_t k : {1, 2, 3, 5}) {
    SCOPED_TRACE("k=" + std::to_string(k));
    const std::vector<int32_t> part_of = RandomParts(g.num_nodes(), k, 10 + k);
    auto parts = BuildWorkerPartitions(g, part_of, k);
    ASSERT_TRUE(parts.ok()) << parts.status().ToString();
    CheckAgainstRecount(g, part_of, k, *parts);
    EXPECT_EQ(parts->at(0).feature_dim, 3);
  }
}

TEST(BuildWorkerPartitions, EmptyPartsAreAllowed) {
  const HeteroGraph g = MixedGraph(2);
  std::vector<int32_t> part_of = RandomParts(g.num_nodes(), 2, 3);
  for (auto& p : part_of) p = p == 0 ? 0 : 3;  // parts 1 and 2 stay empty
  auto parts = BuildWorkerPartitions(g, part_of, 4);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  CheckAgainstRecount(g, part_of, 4, *parts);
  EXPECT_EQ(parts->at(1).num_owned, 0);
  EXPECT_EQ(parts->at(1).src.size(), 0u);
}

TEST(BuildWorkerPartitions, DisagreeingFeatureWidthsDropFeatures) {
  const HeteroGraph g = MixedGraph(3, /*feature_dim_b=*/5);
  auto parts = BuildWorkerPartitions(g, RandomParts(g.num_nodes(), 2, 1), 2);
  ASSERT_TRUE(parts.ok());
  for (const auto& p : *parts) {
    EXPECT_EQ(p.feature_dim, 0);
    EXPECT_TRUE(p.features.empty());
  }
}

TEST(BuildWorkerPartitions, RefusesABadAssignment) {
  const HeteroGraph g = MixedGraph(4);
  EXPECT_FALSE(BuildWorkerPartitions(g, std::vector<int32_t>(3, 0), 2).ok());
  std::vector<int32_t> part_of(g.num_nodes(), 0);
  part_of[7] = 2;
  EXPECT_FALSE(BuildWorkerPartitions(g, part_of, 2).ok());
  EXPECT_FALSE(BuildWorkerPartitions(g, part_of, 0).ok());
}

TEST(RangeBook, LooksUpOwnerAndLocalRow) {
  const HeteroGraph g = MixedGraph(5);
  std::vector<int32_t> part_of = RandomParts(g.num_nodes(), 3, 8);
  for (auto& p : part_of) p = p == 1 ? 2 : p;  // part 1 empty: offsets[1] == offsets[2]
  auto parts = BuildWorkerPartitions(g, part_of, 4);
  ASSERT_TRUE(parts.ok());
  const std::vector<int64_t>& book = parts->at(0).offsets;
  for (const auto& p : *parts) {
    for (int64_t i = 0; i < p.num_rows(); ++i) {
      const BookEntry e = LookupRangeBook(book, p.row_new_id[i]);
      ASSERT_EQ(e.part, part_of[p.row_orig_id[i]]);
      EXPECT_EQ(parts->at(e.part).row_orig_id[e.local], p.row_orig_id[i]);
      if (i < p.num_owned) {
        EXPECT_EQ(e.local, i);
      }
    }
  }
  EXPECT_EQ(LookupRangeBook(book, -1).part, -1);
  EXPECT_EQ(LookupRangeBook(book, g.num_nodes()).part, -1);
  // Parts 0 and 2 are empty: [0,0) [0,5) [5,5) [5,9).
  EXPECT_EQ(LookupRangeBook({0, 0, 5, 5, 9}, 0).part, 1);
  EXPECT_EQ(LookupRangeBook({0, 0, 5, 5, 9}, 4).part, 1);
  EXPECT_EQ(LookupRangeBook({0, 0, 5, 5, 9}, 5).part, 3);
  EXPECT_EQ(LookupRangeBook({0, 0, 5, 5, 9}, 8).local, 3);
}

// ---- encoding -------------------------------------------------------------------------------------

WorkerPartition SamplePartition() {
  const HeteroGraph g = MixedGraph(6);
  auto parts = BuildWorkerPartitions(g, RandomParts(g.num_nodes(), 3, 2), 3);
  EXPECT_TRUE(parts.ok());
  return parts->at(1);
}

TEST(PartitionEncoding, RoundTrips) {
  const WorkerPartition p = SamplePartition();
  const std::vector<uint8_t> bytes = EncodePartition(p);
  ASSERT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "TSLPART1");
  auto q = DecodePartition(bytes.data(), bytes.size());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(SamePartition(p, *q));
}

TEST(PartitionEncoding, EveryTruncationIsBadData) {
  const std::vector<uint8_t> bytes = EncodePartition(SamplePartition());
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + len);  // own buffer so ASan sees overreads
    auto r = DecodePartition(cut.data(), cut.size());
    ASSERT_FALSE(r.ok()) << "accepted a truncation to " << len << " of " << bytes.size() << " bytes";
    EXPECT_EQ(r.status().code(), Code::kBadData);
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(DecodePartition(longer.data(), longer.size()).status().code(), Code::kBadData);
}

TEST(PartitionEncoding, RandomByteFlipsGiveErrorsOrValidPartitions) {
  const std::vector<uint8_t> bytes = EncodePartition(SamplePartition());
  std::mt19937_64 rng(123);
  int rejected = 0;
  const int trials = 3000;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<uint8_t> bad = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    auto r = DecodePartition(bad.data(), bad.size());
    if (r.ok()) {
      ASSERT_TRUE(ValidatePartition(*r).ok());
    } else {
      ASSERT_EQ(r.status().code(), Code::kBadData);
      ++rejected;
    }
  }
  // Flips in feature values or mask-neutral spots decode fine; most flips hit sizes, ids or offsets.
  EXPECT_GT(rejected, trials / 4);
}

TEST(PartitionEncoding, RejectsInconsistentContents) {
  const WorkerPartition good = SamplePartition();
  auto rejects = [](const WorkerPartition& p, const std::string& what) {
    const std::vector<uint8_t> bytes = EncodePartition(p);
    auto r = DecodePartition(bytes.data(), bytes.size());
    EXPECT_FALSE(r.ok()) << what;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kBadData) << what;
    }
  };
  ASSERT_GT(good.src.size(), 0u);
  WorkerPartition p = good;
  p.src[0] = p.num_rows();
  rejects(p, "src row out of range");
  p = good;
  p.dst[0] = p.num_owned;
  rejects(p, "dst row not owned");
  p = good;
  p.rel_ptr[1] = p.rel_ptr[2] + 1;
  rejects(p, "rel_ptr not monotone");
  p = good;
  p.offsets.back() += 1;
  rejects(p, "offsets do not cover total_nodes");
  p = good;
  p.type_offsets.back() -= 1;
  rejects(p, "type_offsets do not cover total_nodes");
  p = good;
  std::swap(p.type_offsets[0], p.type_offsets[1]);
  rejects(p, "type_offsets out of order");
  p = good;
  p.labels.pop_back();
  rejects(p, "labels too short");
  p = good;
  p.features.pop_back();
  rejects(p, "features too short");
  p = good;
  p.part = p.num_parts;
  rejects(p, "part out of range");
  p = good;
  p.labels[0] = p.num_classes;
  rejects(p, "label out of range");
  p = good;
  if (p.num_rows() > p.num_owned + 1) {
    std::swap(p.row_new_id[p.num_owned], p.row_new_id[p.num_owned + 1]);
    rejects(p, "halo unsorted");
  }
  std::vector<uint8_t> bytes = EncodePartition(good);
  bytes[0] = 'X';
  EXPECT_NE(DecodePartition(bytes.data(), bytes.size()).status().message().find("magic"), std::string::npos);
  bytes = EncodePartition(good);
  bytes[8] = 99;  // version
  EXPECT_NE(DecodePartition(bytes.data(), bytes.size()).status().message().find("version"), std::string::npos);
  EXPECT_FALSE(DecodePartition(nullptr, 0).ok());
}

// ---- HDF5 files -----------------------------------------------------------------------------------

class PartitionFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tessel-partition-test-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(PartitionFileTest, RoundTripsEveryPart) {
  const HeteroGraph g = MixedGraph(7);
  auto parts = BuildWorkerPartitions(g, RandomParts(g.num_nodes(), 3, 4), 3);
  ASSERT_TRUE(parts.ok());
  for (const auto& p : *parts) {
    const std::string path = (dir_ / ("part-" + std::to_string(p.part) + ".h5")).string();
    ASSERT_TRUE(WritePartitionFile(p, path).ok());
    auto q = ReadPartitionFile(path);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_TRUE(SamePartition(p, *q));
  }
  // No temporary files are left behind.
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

TEST_F(PartitionFileTest, ThousandsOfLongRelationNamesRoundTrip) {
  // Knowledge graphs with inverse relations easily pass HDF5's 64 KiB compact-attribute limit.
  WorkerPartition p = SamplePartition();
  const int extra = 5000;
  for (int r = 0; r < extra; ++r) {
    p.relation_names.push_back("/some/long/freebase/relation/path/number/" + std::to_string(r) + std::string(60, 'x'));
    p.rel_ptr.push_back(p.rel_ptr.back());
  }
  const std::string path = (dir_ / "many.h5").string();
  const Status st = WritePartitionFile(p, path);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto q = ReadPartitionFile(path);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(SamePartition(p, *q));
}

TEST_F(PartitionFileTest, FeaturelessPartitionRoundTrips) {
  const HeteroGraph g = MixedGraph(8, 5);
  auto parts = BuildWorkerPartitions(g, RandomParts(g.num_nodes(), 2, 4), 2);
  ASSERT_TRUE(parts.ok());
  const std::string path = (dir_ / "p.h5").string();
  ASSERT_TRUE(WritePartitionFile(parts->at(0), path).ok());
  auto q = ReadPartitionFile(path);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(SamePartition(parts->at(0), *q));
}

TEST_F(PartitionFileTest, MissingTruncatedOrForeignFilesAreBadData) {
  EXPECT_EQ(ReadPartitionFile((dir_ / "nope.h5").string()).status().code(), Code::kBadData);
  const std::string text = (dir_ / "text.h5").string();
  std::ofstream(text) << "not hdf5";
  EXPECT_EQ(ReadPartitionFile(text).status().code(), Code::kBadData);

  const std::string path = (dir_ / "p.h5").string();
  ASSERT_TRUE(WritePartitionFile(SamplePartition(), path).ok());
  const auto size = std::filesystem::file_size(path);
  for (double frac : {0.9, 0.5, 0.1}) {
    const std::string cut = (dir_ / ("cut" + std::to_string(frac) + ".h5")).string();
    std::filesystem::copy_file(path, cut);
    std::filesystem::resize_file(cut, static_cast<uintmax_t>(size * frac));
    auto r = ReadPartitionFile(cut);
    EXPECT_FALSE(r.ok()) << frac;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kBadData) << r.status().ToString();
    }
  }
}

// The distributed partitioner's writer: rows in any order and in pieces give WritePartitionFile's file.
TEST_F(PartitionFileTest, FeatureRowsWrittenInPiecesReadBackAsOne) {
  const HeteroGraph g = MixedGraph(9);
  auto parts = BuildWorkerPartitions(g, RandomParts(g.num_nodes(), 2, 4), 2);
  ASSERT_TRUE(parts.ok());
  const WorkerPartition& p = parts->at(1);
  ASSERT_GT(p.feature_dim, 0);
  ASSERT_GE(p.num_owned, 3);
  WorkerPartition bare = p;
  bare.features.clear();
  const std::string path = (dir_ / "part-1.h5").string();
  Result<PartitionFileWriter> w = PartitionFileWriter::Create(bare, path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(path));  // only once committed
  const auto row = [&](int64_t i) { return p.features.data() + i * p.feature_dim; };
  const int64_t n = p.num_owned, mid = n / 2;
  ASSERT_TRUE(w->WriteRows(mid, row(mid), n - mid).ok());  // the second half first
  ASSERT_TRUE(w->WriteRows(0, row(0), 1).ok());
  ASSERT_TRUE(w->WriteRows(1, row(1), mid - 1).ok());
  const Status st = w->Commit();
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto q = ReadPartitionFile(path);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(SamePartition(p, *q));
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

TEST_F(PartitionFileTest, AWriterWithRowsMissingLeavesNothing) {
  const HeteroGraph g = MixedGraph(9);
  auto parts = BuildWorkerPartitions(g, RandomParts(g.num_nodes(), 2, 4), 2);
  ASSERT_TRUE(parts.ok());
  WorkerPartition p = parts->at(0);
  std::vector<float> features;
  features.swap(p.features);
  const std::string path = (dir_ / "part-0.h5").string();
  {
    Result<PartitionFileWriter> w = PartitionFileWriter::Create(p, path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE(w->WriteRows(0, features.data(), p.num_owned - 1).ok());
    ASSERT_TRUE(w->WriteRows(0, features.data(), 1).ok());                                 // again: still one row short
    EXPECT_EQ(w->WriteRows(p.num_owned - 1, features.data(), 2).code(), Code::kInternal);  // past the end
    const Status st = w->Commit();
    EXPECT_EQ(st.code(), Code::kInternal) << st.ToString();
    EXPECT_NE(st.message().find("1 of its"), std::string::npos) << st.ToString();
  }
  {  // Abandoned: the destructor removes its temporary.
    Result<PartitionFileWriter> w = PartitionFileWriter::Create(p, path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(PartitionFileTest, RefusesToWriteAnInvalidPartition) {
  WorkerPartition p = SamplePartition();
  p.dst[0] = p.num_owned + 5;
  const std::string path = (dir_ / "bad.h5").string();
  EXPECT_FALSE(WritePartitionFile(p, path).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  // Features that are not every owned row's (empty ones are a writer's features to come, not a file's).
  WorkerPartition q = SamplePartition();
  ASSERT_GT(q.feature_dim, 0);
  q.features.clear();
  const Status st = WritePartitionFile(q, path);
  EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

}  // namespace
}  // namespace tessel::storage

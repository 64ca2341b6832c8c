#include "workers/rgnn/layout.h"

#include <gtest/gtest.h>

namespace tessel::workers {
namespace {

// 3 owned rows + 1 halo row; relation 0: 0->1, 0->2, 3->1 ; relation 1: 2->0, 2->0 (duplicate), 1->0
storage::WorkerPartition Tiny() {
  storage::WorkerPartition p;
  p.num_owned = 3;
  p.row_new_id = {0, 1, 2, 3};
  p.row_orig_id = {0, 1, 2, 3};
  p.offsets = {0, 3, 4};
  p.num_parts = 2;
  p.relation_names = {"a", "b"};
  p.rel_ptr = {0, 3, 6};
  p.src = {0, 0, 3, 1, 2, 2};
  p.dst = {1, 2, 1, 0, 0, 0};
  return p;
}

TEST(RelationLayout, CompactRowsAreUniqueRelationSourcePairs) {
  auto l = RelationLayout::Build(Tiny());
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->num_uniq, 4);  // (a,0) (a,3) (b,1) (b,2)
  const int64_t* up = l->uniq_ptr.data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(up, up + 3), (std::vector<int64_t>{0, 2, 4}));
  const int64_t* us = l->uniq_src.data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(us, us + 4), (std::vector<int64_t>{0, 3, 1, 2}));
  const int64_t* eu = l->edge_uniq.data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(eu, eu + 6), (std::vector<int64_t>{0, 0, 1, 2, 3, 3}));
  const int64_t* uep = l->uniq_edge_ptr.data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(uep, uep + 5), (std::vector<int64_t>{0, 2, 3, 4, 6}));
}

TEST(RelationLayout, NormIsOneOverInDegreePerRelation) {
  auto l = RelationLayout::Build(Tiny());
  ASSERT_TRUE(l.ok());
  const float* n = l->norm.data<float>();
  // relation a: dst 1 has 2 edges, dst 2 has 1; relation b: dst 0 has 3 (the duplicate counts)
  EXPECT_FLOAT_EQ(n[0], 0.5f);
  EXPECT_FLOAT_EQ(n[1], 1.0f);
  EXPECT_FLOAT_EQ(n[2], 0.5f);
  for (int e = 3; e < 6; ++e) EXPECT_FLOAT_EQ(n[e], 1.0f / 3.0f);
}

TEST(RelationLayout, DestinationCsrListsEveryEdgeOnce) {
  auto l = RelationLayout::Build(Tiny());
  ASSERT_TRUE(l.ok());
  const int64_t* ptr = l->dst_ptr.data<int64_t>();
  const int64_t* edges = l->dst_edges.data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(ptr, ptr + 4), (std::vector<int64_t>{0, 3, 5, 6}));
  EXPECT_EQ(std::vector<int64_t>(edges, edges + 6), (std::vector<int64_t>{3, 4, 5, 0, 2, 1}));
}

TEST(RelationLayout, UnsortedEdgesAreBadData) {
  auto p = Tiny();
  std::swap(p.src[0], p.src[2]);
  auto l = RelationLayout::Build(p);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), Code::kBadData);
}

}  // namespace
}  // namespace tessel::workers

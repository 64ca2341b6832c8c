// Partitioned sampling structure (part_structure.h) and the sampler's owner-drawn path, against the
// replicated structure as the reference (SampledGraph::FromGraph, which the replicated sampler tests in
// sampler_test.cc hold to the sampling law):
//  - a part's in-edges are, node by node, exactly the replicated graph's, in the same order, and each
//    source's owner is its part;
//  - with 1, 2, 3 and 4 workers (threads over ThreadComm), every worker's blocks for its seeds of a
//    global batch equal the replicated sampler's, row for row and edge for edge, fanouts per relation
//    and in total, and with every neighbour (the evaluation's -1);
//  - an owner asked for a node it does not own fails with kBadData naming itself, after the exchanges,
//    so no peer is left waiting.
#include "workers/rgnn/part_structure.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "storage/generator.h"
#include "storage/partition.h"
#include "tests/unit/workers/rgnn/thread_comm.h"
#include "workers/rgnn/sampler.h"

namespace tessel::workers {
namespace {

using testing::ThreadComm;
using testing::ThreadGroup;

storage::HeteroGraph Graph() {
  storage::GenerateOptions o;
  o.nodes = 700;
  o.node_types = 3;
  o.relations = 4;
  o.classes = 3;
  o.avg_degree = 7;
  o.feature_dim = 0;
  o.train_fraction = 0.5;
  o.test_fraction = 0.3;
  o.seed = 11;
  auto g = storage::GenerateGraph(o);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

std::vector<int32_t> PartOf(int64_t nodes, int workers) {
  std::vector<int32_t> part_of(static_cast<size_t>(nodes));
  for (size_t i = 0; i < part_of.size(); ++i) part_of[i] = static_cast<int32_t>((i * 7 + i / 11) % workers);
  return part_of;
}

std::vector<PartStructure> Parts(const storage::HeteroGraph& g, const std::vector<int32_t>& part_of, int workers) {
  auto built = storage::BuildWorkerPartitions(g, part_of, workers);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  std::vector<PartStructure> parts;
  for (const storage::WorkerPartition& p : *built) {
    auto s = PartStructure::FromPartition(p);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    parts.push_back(std::move(s).value());
  }
  return parts;
}

TEST(PartStructure, HoldsTheReplicatedInEdgesOfItsNodesInTheirOrder) {
  const auto g = Graph();
  const int workers = 3;
  const auto part_of = PartOf(g.num_nodes(), workers);
  const SampledGraph whole = SampledGraph::FromGraph(g, part_of);
  int64_t owned = 0, edges = 0;
  for (const PartStructure& p : Parts(g, part_of, workers)) {
    ASSERT_TRUE(std::is_sorted(p.owned.begin(), p.owned.end()));
    EXPECT_EQ(p.num_nodes, whole.num_nodes);
    EXPECT_EQ(p.type_offsets, whole.type_offsets);
    for (size_t i = 0; i < p.owned.size(); ++i) {
      const auto v = static_cast<size_t>(p.owned[i]);
      ASSERT_EQ(whole.part_of[v], p.worker);
      EXPECT_EQ(p.labels[i], whole.labels[v]);
      EXPECT_EQ(p.train_mask[i], whole.train_mask[v]);
      EXPECT_EQ(p.test_mask[i], whole.test_mask[v]);
      ASSERT_EQ(p.in_ptr[i + 1] - p.in_ptr[i], whole.in_ptr[v + 1] - whole.in_ptr[v]) << "node " << v;
      for (int64_t k = 0; k < p.in_ptr[i + 1] - p.in_ptr[i]; ++k) {
        const auto a = static_cast<size_t>(p.in_ptr[i] + k), b = static_cast<size_t>(whole.in_ptr[v] + k);
        ASSERT_EQ(p.in_src[a], whole.in_src[b]) << "node " << v << " edge " << k;
        ASSERT_EQ(p.in_rel[a], whole.in_rel[b]) << "node " << v << " edge " << k;
        ASSERT_EQ(p.in_owner[a], whole.part_of[static_cast<size_t>(whole.in_src[b])]);
      }
    }
    owned += static_cast<int64_t>(p.owned.size());
    edges += p.num_edges();
  }
  EXPECT_EQ(owned, whole.num_nodes);
  EXPECT_EQ(edges, whole.num_edges());
}

void ExpectSameBlocks(const std::vector<SampledBlock>& a, const std::vector<SampledBlock>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t l = 0; l < a.size(); ++l) {
    EXPECT_EQ(a[l].num_dst, b[l].num_dst) << what << " layer " << l;
    EXPECT_EQ(a[l].src_ids, b[l].src_ids) << what << " layer " << l;
    EXPECT_EQ(a[l].src_owner, b[l].src_owner) << what << " layer " << l;
    EXPECT_EQ(a[l].rel_ptr, b[l].rel_ptr) << what << " layer " << l;
    EXPECT_EQ(a[l].src, b[l].src) << what << " layer " << l;
    EXPECT_EQ(a[l].dst, b[l].dst) << what << " layer " << l;
  }
}

TEST(PartitionedSampler, BlocksEqualTheReplicatedSamplersForAnyWorkerCount) {
  const auto g = Graph();
  for (const int workers : {1, 2, 3, 4}) {
    const auto part_of = PartOf(g.num_nodes(), workers);
    const SampledGraph whole = SampledGraph::FromGraph(g, part_of);
    const std::vector<PartStructure> parts = Parts(g, part_of, workers);
    for (const auto& [fanouts, per] : {std::pair<std::vector<int32_t>, FanoutPer>{{3, 2}, FanoutPer::kRelation},
                                       {{4, 5, 2}, FanoutPer::kTotal},
                                       {{-1, -1}, FanoutPer::kTotal}}) {
      ThreadGroup group(workers);
      ThreadGroup::Run(workers, [&](int rank) {
        std::unique_ptr<WorkerComm> comm = testing::CommOf(&group, rank);
        Sampler replicated(whole, fanouts, per);
        Sampler partitioned(parts[static_cast<size_t>(rank)], fanouts, per);
        for (int batch = 0; batch < 6; ++batch) {
          // A global batch of 90 nodes; this worker's seeds are those it owns (sometimes none).
          std::vector<int64_t> seeds;
          for (int64_t v = batch * 37; v < g.num_nodes() && v < batch * 37 + 90; ++v) {
            if (part_of[static_cast<size_t>(v)] == rank && (batch != 3 || rank != 0)) seeds.push_back(v);
          }
          const uint64_t key = MixKey(5, static_cast<uint64_t>(batch));
          Result<std::vector<SampledBlock>> got = partitioned.Sample(seeds, key, *comm);
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          if (seeds.empty()) continue;
          ExpectSameBlocks(replicated.Sample(seeds, key), *got,
                           StrCat(workers, " workers, rank ", rank, ", batch ", batch));
        }
      });
    }
  }
}

TEST(PartitionedSampler, AnOwnerAskedForANodeItDoesNotOwnFailsAfterTheExchanges) {
  const auto g = Graph();
  const int workers = 3;
  const auto part_of = PartOf(g.num_nodes(), workers);
  std::vector<PartStructure> parts = Parts(g, part_of, workers);
  // Worker 0 believes every source it holds is worker 1's: worker 1 gets asked for nodes it does not own.
  for (int32_t& owner : parts[0].in_owner) owner = 1;
  ThreadGroup group(workers);
  std::vector<Status> status(workers);
  ThreadGroup::Run(workers, [&](int rank) {
    ThreadComm comm(&group, rank);
    Sampler sampler(parts[static_cast<size_t>(rank)], {2, 2}, FanoutPer::kTotal);
    std::vector<int64_t> seeds(parts[static_cast<size_t>(rank)].owned.begin(),
                               parts[static_cast<size_t>(rank)].owned.begin() + 20);
    status[static_cast<size_t>(rank)] = sampler.Sample(seeds, 7, comm).status();
  });
  EXPECT_EQ(status[1].code(), Code::kBadData) << status[1].ToString();
  EXPECT_NE(status[1].message().find("worker 1 was asked to sample the neighbours of node"), std::string::npos)
      << status[1].message();
  EXPECT_TRUE(status[2].ok()) << status[2].ToString();
}

}  // namespace
}  // namespace tessel::workers

#include "workers/rgnn/halo.h"

#include <gtest/gtest.h>

#include <map>

#include "storage/generator.h"
#include "tests/unit/workers/rgnn/thread_comm.h"

namespace tessel::workers {
namespace {

using testing::ThreadComm;
using testing::ThreadGroup;

// Rows move one peer a round (round k: to the worker k ahead, from the worker k behind); 2 to 5 workers
// cover every shift, including those that are not their own inverse.
class HaloExchangeWorkers : public ::testing::TestWithParam<int> {};

TEST_P(HaloExchangeWorkers, ForwardFillsHaloRowsAndBackwardSumsIntoOwners) {
  storage::GenerateOptions o;
  o.nodes = 300;
  o.node_types = 1;
  o.relations = 2;
  o.classes = 2;
  o.avg_degree = 3;
  o.feature_dim = 0;
  auto g = storage::GenerateGraph(o);
  ASSERT_TRUE(g.ok());
  const int parts = GetParam();
  std::vector<int32_t> part_of(static_cast<size_t>(g->num_nodes()));
  for (size_t i = 0; i < part_of.size(); ++i) part_of[i] = static_cast<int32_t>((i * 7 + i / 5) % parts);
  auto built = storage::BuildWorkerPartitions(*g, part_of, parts);
  ASSERT_TRUE(built.ok());

  // Independent expectation: how many other parts hold each new id in their halo.
  std::map<int64_t, int> halo_holders;
  for (const auto& p : *built) {
    for (int64_t row = p.num_owned; row < p.num_rows(); ++row) ++halo_holders[p.row_new_id[static_cast<size_t>(row)]];
  }
  ASSERT_FALSE(halo_holders.empty()) << "the test graph must have cross-part edges";

  const int64_t dim = 2;
  ThreadGroup group(parts);
  ThreadGroup::Run(parts, [&](int rank) {
    const auto& p = (*built)[static_cast<size_t>(rank)];
    ThreadComm comm(&group, rank);
    auto halo = HaloExchange::Build(p, comm);
    ASSERT_TRUE(halo.ok()) << halo.status().ToString();
    std::vector<float> full(static_cast<size_t>(p.num_rows() * dim), -1.f);
    for (int64_t r = 0; r < p.num_owned; ++r) {
      full[static_cast<size_t>(r * dim)] = static_cast<float>(p.row_new_id[static_cast<size_t>(r)]);
      full[static_cast<size_t>(r * dim + 1)] = 0.5f;
    }
    ASSERT_TRUE(halo->Forward(full.data(), dim).ok());
    for (int64_t r = p.num_owned; r < p.num_rows(); ++r) {
      EXPECT_EQ(full[static_cast<size_t>(r * dim)], static_cast<float>(p.row_new_id[static_cast<size_t>(r)]));
      EXPECT_EQ(full[static_cast<size_t>(r * dim + 1)], 0.5f);
    }
    std::vector<float> grad(static_cast<size_t>(p.num_rows() * dim), 0.f);
    for (int64_t r = p.num_owned; r < p.num_rows(); ++r) grad[static_cast<size_t>(r * dim)] = 1.f;
    ASSERT_TRUE(halo->Backward(grad.data(), dim).ok());
    for (int64_t r = 0; r < p.num_owned; ++r) {
      const auto it = halo_holders.find(p.row_new_id[static_cast<size_t>(r)]);
      const float want = it == halo_holders.end() ? 0.f : static_cast<float>(it->second);
      EXPECT_EQ(grad[static_cast<size_t>(r * dim)], want) << "row " << r;
      EXPECT_EQ(grad[static_cast<size_t>(r * dim + 1)], 0.f);
    }
    EXPECT_GT(halo->bytes_sent(), 0);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, HaloExchangeWorkers, ::testing::Values(2, 3, 4, 5));

}  // namespace
}  // namespace tessel::workers

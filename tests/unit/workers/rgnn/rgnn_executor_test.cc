// The RGCN trainer across worker counts: workers run as threads over ThreadComm, with the real
// libtessel_rgnn.so kernels. One worker and three workers must see the same losses epoch by epoch,
// which only holds if the halo exchange (forward and backward) and the gradient sum are right.
#include "workers/rgnn/rgcn_trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "core/thread_pool.h"
#include "storage/generator.h"
#include "storage/partition.h"
#include "tests/unit/workers/rgnn/thread_comm.h"

namespace tessel::workers {
namespace {

using testing::ThreadComm;
using testing::ThreadGroup;

storage::HeteroGraph SmallGraph(int64_t feature_dim) {
  storage::GenerateOptions o;
  o.nodes = 600;
  o.node_types = 2;
  o.relations = 3;
  o.classes = 3;
  o.avg_degree = 4;
  o.feature_dim = feature_dim;
  o.train_fraction = 0.5;
  o.test_fraction = 0.3;
  o.seed = 11;
  auto g = storage::GenerateGraph(o);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

KernelRegistry LoadKernels() {
  KernelRegistry registry;
  for (const char* name : {"libtessel_nn.so", "libtessel_rgnn.so"}) {
    Status st = registry.LoadPlugin(std::string(TESSEL_BINARY_DIR) + "/plugins/" + name);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return registry;
}

// Trains `epochs` epochs on `parts` workers (threads) and returns worker 0's per-epoch losses.
std::vector<double> Train(const storage::HeteroGraph& g, int parts, RgcnInput input, int epochs, EvalStats* eval) {
  std::vector<int32_t> part_of(static_cast<size_t>(g.num_nodes()));
  for (size_t i = 0; i < part_of.size(); ++i) part_of[i] = static_cast<int32_t>((i * 7 + i / 13) % static_cast<size_t>(parts));
  auto built = storage::BuildWorkerPartitions(g, part_of, parts);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  const KernelRegistry kernels = LoadKernels();
  RgcnConfig config;
  config.input = input;
  config.hidden = 8;
  config.seed = 5;
  ThreadGroup group(parts);
  std::vector<std::vector<double>> losses(static_cast<size_t>(parts));
  std::mutex mu;
  ThreadGroup::Run(parts, [&](int rank) {
    ThreadComm comm(&group, rank);
    ThreadPool pool(1);
    auto trainer = RgcnTrainer::Create((*built)[static_cast<size_t>(rank)], config, kernels, comm, pool);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    for (int e = 0; e < epochs; ++e) {
      auto stats = (*trainer)->TrainEpoch();
      ASSERT_TRUE(stats.ok()) << stats.status().ToString();
      losses[static_cast<size_t>(rank)].push_back(stats->loss);
    }
    auto ev = (*trainer)->Evaluate();
    ASSERT_TRUE(ev.ok());
    std::lock_guard<std::mutex> lock(mu);
    if (rank == 0 && eval) *eval = *ev;
  });
  for (int r = 1; r < parts; ++r) EXPECT_EQ(losses[static_cast<size_t>(r)], losses[0]) << "workers disagree on the loss";
  return losses[0];
}

void ExpectSameLosses(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t e = 0; e < a.size(); ++e) EXPECT_NEAR(a[e], b[e], 2e-5 * std::abs(a[e]) + 1e-7) << "epoch " << e + 1;
}

TEST(RgcnTrainer, ThreeWorkersMatchOneWorkerWithFeatures) {
  const auto g = SmallGraph(6);
  EvalStats one_eval, three_eval;
  const auto one = Train(g, 1, RgcnInput::kFeatures, 12, &one_eval);
  const auto three = Train(g, 3, RgcnInput::kFeatures, 12, &three_eval);
  ExpectSameLosses(one, three);
  EXPECT_EQ(one_eval.test_total, three_eval.test_total);
  EXPECT_NEAR(one_eval.test_accuracy, three_eval.test_accuracy, 1.0 / static_cast<double>(one_eval.test_total) + 1e-12);
}

TEST(RgcnTrainer, ThreeWorkersMatchOneWorkerWithOneHotInput) {
  const auto g = SmallGraph(0);
  const auto one = Train(g, 1, RgcnInput::kOneHot, 12, nullptr);
  const auto three = Train(g, 3, RgcnInput::kOneHot, 12, nullptr);
  ExpectSameLosses(one, three);
}

TEST(RgcnTrainer, LearnsThePlantedStructure) {
  const auto g = SmallGraph(6);
  EvalStats eval;
  const auto loss = Train(g, 2, RgcnInput::kFeatures, 60, &eval);
  EXPECT_LT(loss.back(), 0.5 * loss.front());
  EXPECT_GT(eval.test_accuracy, 2.0 / 3.0) << "3 classes: chance is 1/3";
}

TEST(RgcnTrainer, FeatureInputWithoutFeaturesIsRefused) {
  const auto g = SmallGraph(0);
  auto parts = storage::BuildWorkerPartitions(g, std::vector<int32_t>(static_cast<size_t>(g.num_nodes()), 0), 1);
  ASSERT_TRUE(parts.ok());
  const KernelRegistry kernels = LoadKernels();
  LocalComm comm;
  ThreadPool pool(1);
  RgcnConfig config;
  config.input = RgcnInput::kFeatures;
  auto trainer = RgcnTrainer::Create((*parts)[0], config, kernels, comm, pool);
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.status().code(), Code::kUsage);
}

}  // namespace
}  // namespace tessel::workers

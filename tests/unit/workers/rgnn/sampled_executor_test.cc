// The sampled RGNN executor ("rgnn.sampled") end to end, with the real plugin kernels, built through
// the executor registry as a worker builds it:
//  - prefetch on and off give bit-identical losses (the prefetch thread prepares exactly the batches
//    the training thread would), for every model;
//  - one and two workers (threads over ThreadComm) see the same losses, epoch by epoch: the sampled
//    batches do not depend on the worker count, and the feature exchange delivers the right rows;
//  - partitioned structure (each worker its partition's in-edges, the owners drawing their nodes'
//    neighbours) gives the replicated structure's losses bit for bit, with 1, 2, 3 and 4 workers;
//  - training learns the planted structure, and evaluation reports the test nodes.
// In the sanitizer build (label sanitize) this also runs the prefetch thread under ASan and UBSan.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "core/thread_pool.h"
#include "storage/generator.h"
#include "storage/partition.h"
#include "tests/unit/workers/rgnn/thread_comm.h"
#include "workers/executor_registry.h"
#include "workers/rgnn/rgnn_executor.h"

namespace tessel::workers {
namespace {

using testing::ThreadGroup;

storage::HeteroGraph Graph() {
  storage::GenerateOptions o;
  o.nodes = 900;
  o.node_types = 2;
  o.relations = 3;
  o.classes = 3;
  o.avg_degree = 6;
  o.feature_dim = 8;
  o.train_fraction = 0.5;
  o.test_fraction = 0.3;
  o.seed = 4;
  auto g = storage::GenerateGraph(o);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

KernelRegistry LoadKernels() {
  KernelRegistry registry;
  for (const char* name : {"libtessel_nn.so", "libtessel_rgnn.so", "libtessel_gather.so"}) {
    Status st = registry.LoadPlugin(std::string(TESSEL_BINARY_DIR) + "/plugins/" + name);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return registry;
}

// The assignment of worker `w` of `workers`, as the graph planner makes it (memory feature store).
std::unique_ptr<RgnnSampledAssignment> Assignment(const storage::HeteroGraph& g, const std::string& model, int w,
                                                  int workers, bool prefetch, int epochs, bool partitioned) {
  std::vector<int32_t> part_of(static_cast<size_t>(g.num_nodes()));
  for (size_t i = 0; i < part_of.size(); ++i) part_of[i] = static_cast<int32_t>((i * 5 + i / 7) % workers);
  auto a = std::make_unique<RgnnSampledAssignment>();
  a->settings.model = model;
  a->settings.layers = 2;
  a->settings.input = ModelInput::kFeatures;
  a->settings.hidden = 8;
  a->settings.lr = 0.01;
  a->settings.beta1 = 0.9, a->settings.beta2 = 0.999, a->settings.eps = 1e-8;
  a->settings.l2 = 5e-4;
  a->settings.heads = model == "rgcn" ? 1 : 2;
  a->settings.epochs = epochs;
  a->sampling.fanouts = {4, 3};
  a->sampling.eval_fanouts = {};
  a->sampling.batch_size = 96;
  a->sampling.prefetch = prefetch;
  a->sampling.fanout_per = FanoutPer::kTotal;
  a->sampling.store = FeatureStoreChoice::kMemory;
  a->worker = w;
  a->num_workers = workers;
  a->feature_dim = 8;
  if (partitioned) {
    auto parts = storage::BuildWorkerPartitions(g, part_of, workers);
    EXPECT_TRUE(parts.ok()) << parts.status().ToString();
    a->partition = std::move((*parts)[static_cast<size_t>(w)]);
    return a;
  }
  a->graph = std::make_shared<const SampledGraph>(SampledGraph::FromGraph(g, part_of));
  for (int64_t t = 0, base = 0; t < static_cast<int64_t>(g.node_types.size()); ++t) {
    const storage::NodeType& nt = g.node_types[static_cast<size_t>(t)];
    for (int64_t i = 0; i < nt.count; ++i) {
      if (part_of[static_cast<size_t>(base + i)] != w) continue;
      a->owned_features.insert(a->owned_features.end(), nt.features.begin() + i * 8, nt.features.begin() + (i + 1) * 8);
    }
    base += nt.count;
  }
  return a;
}

struct Outcome {
  std::vector<double> losses;
  Record eval;
};

Outcome Train(const storage::HeteroGraph& g, const std::string& model, int workers, bool prefetch, int epochs,
              bool partitioned = false) {
  const KernelRegistry kernels = LoadKernels();
  auto factory = FindExecutor(RgnnSampledAssignment::kKind);
  EXPECT_TRUE(factory.ok()) << factory.status().ToString();
  ThreadGroup group(workers);
  std::vector<Outcome> runs(static_cast<size_t>(workers));
  ThreadGroup::Run(workers, [&](int rank) {
    std::unique_ptr<WorkerComm> comm = testing::CommOf(&group, rank);
    HostDeviceComm device_comm(*comm);
    ThreadPool pool(1);
    ExecutorContext c;
    c.comm = comm.get();
    c.device_comm = &device_comm;
    c.pool = &pool;
    c.kernels = &kernels;
    c.seed = 9;
    // Through the bytes a worker receives.
    ByteWriter out;
    Assignment(g, model, rank, workers, prefetch, epochs, partitioned)->Encode(out);
    const std::vector<uint8_t> bytes = out.Take();
    ByteReader in(bytes.data(), bytes.size());
    std::unique_ptr<AssignmentPayload> payload = (*factory)->decode(in);
    ASSERT_TRUE(in.ok() && payload != nullptr) << in.error();
    auto executor = (*factory)->build(std::move(payload), c);
    ASSERT_TRUE(executor.ok()) << executor.status().ToString();
    for (int e = 1; e <= epochs; ++e) {
      auto step = (*executor)->Step(e);
      ASSERT_TRUE(step.ok()) << step.status().ToString();
      runs[static_cast<size_t>(rank)].losses.push_back(step->loss);
    }
    auto eval = (*executor)->Evaluate();
    ASSERT_TRUE(eval.ok()) << eval.status().ToString();
    runs[static_cast<size_t>(rank)].eval = *eval;
  });
  for (int r = 1; r < workers; ++r) EXPECT_EQ(runs[static_cast<size_t>(r)].losses, runs[0].losses);
  return runs[0];
}

class SampledExecutor : public ::testing::TestWithParam<std::string> {};

TEST_P(SampledExecutor, PrefetchGivesBitIdenticalLosses) {
  const auto g = Graph();
  const Outcome on = Train(g, GetParam(), 1, /*prefetch=*/true, 4);
  const Outcome off = Train(g, GetParam(), 1, /*prefetch=*/false, 4);
  ASSERT_EQ(on.losses.size(), 4u);
  EXPECT_EQ(on.losses, off.losses);
  EXPECT_EQ(FindNumber(on.eval, "test_correct"), FindNumber(off.eval, "test_correct"));
  const RecordValue* prefetched = Find(on.eval, "prefetch");
  ASSERT_NE(prefetched, nullptr);
  EXPECT_TRUE(std::get<bool>(prefetched->data)) << "LocalComm duplicates, so the prefetch thread ran";
}

TEST_P(SampledExecutor, TwoWorkersMatchOneWorker) {
  const auto g = Graph();
  const Outcome one = Train(g, GetParam(), 1, /*prefetch=*/false, 4);
  const Outcome two = Train(g, GetParam(), 2, /*prefetch=*/false, 4);
  ASSERT_EQ(one.losses.size(), two.losses.size());
  for (size_t e = 0; e < one.losses.size(); ++e) {
    EXPECT_NEAR(one.losses[e], two.losses[e], 1e-5 * std::abs(one.losses[e])) << "epoch " << e + 1;
  }
  EXPECT_EQ(FindNumber(one.eval, "test_total"), FindNumber(two.eval, "test_total"));
  // Two workers fetch some rows from each other; one worker reads all of its own.
  EXPECT_GT(FindNumber(two.eval, "feature_rows_remote").value_or(0), 0);
  EXPECT_EQ(FindNumber(one.eval, "feature_rows_remote").value_or(-1), 0);
}

TEST_P(SampledExecutor, PartitionedStructureGivesTheReplicatedLosses) {
  const auto g = Graph();
  for (const int workers : {1, 2, 3, 4}) {
    const Outcome replicated = Train(g, GetParam(), workers, /*prefetch=*/false, 3);
    const Outcome partitioned = Train(g, GetParam(), workers, /*prefetch=*/true, 3, /*partitioned=*/true);
    ASSERT_EQ(replicated.losses.size(), 3u);
    EXPECT_EQ(replicated.losses, partitioned.losses) << workers << " workers";
    for (const char* key : {"test_correct", "test_total", "feature_rows_local", "feature_rows_remote"}) {
      EXPECT_EQ(FindNumber(replicated.eval, key), FindNumber(partitioned.eval, key)) << workers << " workers: " << key;
    }
    const RecordValue* structure = Find(partitioned.eval, "structure");
    ASSERT_NE(structure, nullptr);
    EXPECT_EQ(std::get<std::string>(structure->data), "partitioned");
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SampledExecutor, ::testing::Values("rgcn", "rgat", "hgt"),
                         [](const auto& info) { return info.param; });

TEST(SampledExecutorLearning, LearnsThePlantedStructure) {
  const auto g = Graph();
  const Outcome r = Train(g, "rgcn", 1, /*prefetch=*/true, 25);
  EXPECT_LT(r.losses.back(), 0.5 * r.losses.front());
  EXPECT_GT(FindNumber(r.eval, "test_accuracy").value_or(0), 2.0 / 3.0) << "3 classes: chance is 1/3";
  EXPECT_GT(FindNumber(r.eval, "test_total").value_or(0), 100);
}

}  // namespace
}  // namespace tessel::workers

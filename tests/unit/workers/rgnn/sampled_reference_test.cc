// Sampled training ("rgnn.sampled", built through the executor registry as a worker builds it) against
// the independent double-precision reference (reference_model.h), rather than against other sampled runs:
// one training step whose single batch holds every training seed must give the reference's loss, every
// parameter gradient and the parameters after one Adam step, for RGCN, RGAT and HGT.
//  - EveryNeighbour: fanout -1 on every layer. The seeds' sampled neighbourhoods are then their whole
//    neighbourhoods, so the step is exactly one full-graph epoch. The graph has parallel edges, which
//    count in |N_r(i)| and in an attention softmax as often as they exist.
//  - TwoOfThreeParallelEdges: fanout 2 per relation on a graph whose every (relation, destination) group
//    is one source repeated three times. Whichever two edges are drawn, each relation's mean (RGCN) and
//    each relation's share of a softmax (RGAT, HGT) are the full graph's, so the step must still equal
//    the reference. A normalisation by a node's full degree (3) rather than by what was sampled (2) does
//    not, and that is a mistake the fanout -1 cases cannot see (there the two coincide).
// Tolerances are rgnn_executor_test's for the full graph (fp32 kernels against double): the loss within
// 1e-5 relative, each gradient and updated parameter within 1e-4 of (|reference| + 5e-2 * the largest
// |reference| entry of that tensor). Each case records its largest errors as test properties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "storage/generator.h"
#include "tests/unit/workers/rgnn/executor_bridge.h"
#include "tests/unit/workers/rgnn/reference_model.h"
#include "tests/unit/workers/rgnn/thread_comm.h"
#include "workers/executor_registry.h"
#include "workers/rgnn/rgnn_executor.h"

namespace tessel::workers {
namespace {

namespace ref = ::tessel::testing;
using testing::ThreadComm;
using testing::ThreadGroup;

// rgnn_executor_test's reference graph: 60 nodes of 2 types, 2 base relations with their inverses and
// self-loops, 3 classes, half the nodes for training.
storage::HeteroGraph GeneratedGraph(int64_t feature_dim) {
  storage::GenerateOptions o;
  o.nodes = 60;
  o.node_types = 2;
  o.relations = 2;
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

// The generated graph with every third edge of relation 0 doubled (the generator makes no parallel edges).
storage::HeteroGraph DoubledEdgesGraph(int64_t feature_dim) {
  storage::HeteroGraph g = GeneratedGraph(feature_dim);
  storage::Relation& r = g.relations[0];
  const size_t edges = r.src.size();
  for (size_t e = 0; e < edges; e += 3) {
    r.src.push_back(r.src[e]);
    r.dst.push_back(r.dst[e]);
  }
  return g;
}

// The generated graph with each (relation, destination) group cut to its smallest source, three times over.
storage::HeteroGraph TripledGroupsGraph(int64_t feature_dim) {
  storage::HeteroGraph g = GeneratedGraph(feature_dim);
  for (storage::Relation& r : g.relations) {
    std::map<int64_t, int64_t> source_of;  // destination -> its smallest source
    for (size_t e = 0; e < r.src.size(); ++e) {
      auto [it, fresh] = source_of.emplace(r.dst[e], r.src[e]);
      if (!fresh) it->second = std::min(it->second, r.src[e]);
    }
    r.src.clear();
    r.dst.clear();
    for (const auto& [dst, src] : source_of) {
      for (int k = 0; k < 3; ++k) {
        r.src.push_back(src);
        r.dst.push_back(dst);
      }
    }
  }
  return g;
}

enum class TestGraph { kDoubledEdges, kTripledGroups };

constexpr double kLossTolerance = 1e-5;    // relative
constexpr double kTensorTolerance = 1e-4;  // of |reference| + 5e-2 * the tensor's largest |reference|

// Elementwise |a - b| <= kTensorTolerance * (|b| + 5e-2 * max|b|) (float sums through a softmax backward
// lose ~1e-6 of the largest entry on entries that cancel). Returns the largest |a - b| / (|b| + 5e-2 *
// max|b|), to compare with kTensorTolerance.
double ExpectClose(const Tensor& actual, const ref::RefTensor& expected, const std::string& what) {
  EXPECT_EQ(actual.shape(), expected.shape) << what;
  if (actual.shape() != expected.shape) return std::numeric_limits<double>::infinity();
  double scale = 0;
  for (double v : expected.data) scale = std::max(scale, std::abs(v));
  double worst = 0;
  int reported = 0;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const double a = actual.data<float>()[i], b = expected.data[static_cast<size_t>(i)];
    const double error = std::abs(a - b) / (std::abs(b) + 5e-2 * scale);
    worst = std::max(worst, error);
    if (!(error <= kTensorTolerance) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << a << ", the reference says " << b << " (largest " << scale
                    << ")";
    }
  }
  return worst;
}

KernelRegistry LoadKernels() {
  KernelRegistry registry;
  for (const char* name : {"libtessel_nn.so", "libtessel_rgnn.so"}) {
    Status st = registry.LoadPlugin(std::string(TESSEL_BINARY_DIR) + "/plugins/" + name);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return registry;
}

struct SampledCase {
  std::string name;
  TestGraph graph = TestGraph::kDoubledEdges;
  std::vector<int32_t> fanouts = {-1, -1};
  bool per_relation = false;
  std::string model = "rgcn";
  ModelInput input = ModelInput::kFeatures;
  int64_t feature_dim = 5;  // 6 == hidden: HGT's gated skip on both layers
  int32_t heads = 1;
  HeadMerge merge = HeadMerge::kConcat;
  Reordering reordering = Reordering::kOn;
  int workers = 1;
};

// The assignment of worker `w`, as the graph planner makes it with the memory feature store.
std::unique_ptr<RgnnSampledAssignment> Assignment(const storage::HeteroGraph& g, const SampledCase& c, int w) {
  std::vector<int32_t> part_of(static_cast<size_t>(g.num_nodes()));
  for (size_t i = 0; i < part_of.size(); ++i) part_of[i] = static_cast<int32_t>((i * 5 + i / 7) % c.workers);
  auto a = std::make_unique<RgnnSampledAssignment>();
  RgnnSettings& s = a->settings;
  s.model = c.model;
  s.layers = static_cast<int32_t>(c.fanouts.size());
  s.hidden = 6;
  s.input = c.input;
  s.num_bases = 0;
  s.num_blocks = 0;
  s.heads = c.heads;
  s.head_merge = c.merge;
  s.compaction = Compaction::kPerUniquePair;
  s.reordering = c.reordering;
  s.epochs = 1;
  s.lr = 0.05;
  s.beta1 = 0.9, s.beta2 = 0.999, s.eps = 1e-8;
  s.l2 = 0.01;
  SamplingSettings& sampling = a->sampling;
  sampling.fanouts = c.fanouts;
  sampling.eval_fanouts = {};
  sampling.fanout_per = c.per_relation ? FanoutPer::kRelation : FanoutPer::kTotal;
  sampling.batch_size = static_cast<int32_t>(g.num_nodes());  // one batch: at least every training node
  sampling.prefetch = false;
  sampling.store = FeatureStoreChoice::kMemory;
  a->worker = w;
  a->num_workers = c.workers;
  a->feature_dim = c.input == ModelInput::kFeatures ? c.feature_dim : 0;
  a->graph = std::make_shared<const SampledGraph>(SampledGraph::FromGraph(g, part_of));
  for (int64_t t = 0, base = 0; t < static_cast<int64_t>(g.node_types.size()); ++t) {
    const storage::NodeType& nt = g.node_types[static_cast<size_t>(t)];
    for (int64_t i = 0; i < nt.count && c.input == ModelInput::kFeatures; ++i) {
      if (part_of[static_cast<size_t>(base + i)] != w) continue;
      a->owned_features.insert(a->owned_features.end(), nt.features.begin() + i * c.feature_dim,
                               nt.features.begin() + (i + 1) * c.feature_dim);
    }
    base += nt.count;
  }
  return a;
}

// For gtest's messages, which would otherwise print the case's bytes.
void PrintTo(const SampledCase& c, std::ostream* os) { *os << c.name; }

std::string Short(double x) {
  std::ostringstream out;
  out << std::setprecision(3) << x;
  return out.str();
}

class SampledAgainstReference : public ::testing::TestWithParam<SampledCase> {};

TEST_P(SampledAgainstReference, OneBatchOfEverySeedMatchesLossGradientsAndAdamStep) {
  const SampledCase c = GetParam();
  const int64_t feature_dim = c.input == ModelInput::kFeatures ? c.feature_dim : 0;
  const storage::HeteroGraph g =
      c.graph == TestGraph::kDoubledEdges ? DoubledEdgesGraph(feature_dim) : TripledGroupsGraph(feature_dim);
  const ref::RefGraph ref_graph = ToRefGraph(g, c.input == ModelInput::kOneHot);
  const KernelRegistry kernels = LoadKernels();
  auto factory = FindExecutor(RgnnSampledAssignment::kKind);
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();

  double loss_error = 0, worst_gradient = 0, worst_parameter = 0;
  ThreadGroup group(c.workers);
  ThreadGroup::Run(c.workers, [&](int rank) {
    std::unique_ptr<WorkerComm> comm;
    if (c.workers == 1) {
      comm = std::make_unique<LocalComm>();
    } else {
      comm = std::make_unique<ThreadComm>(&group, rank);
    }
    HostDeviceComm device_comm(*comm);
    ThreadPool pool(1);
    ExecutorContext context;
    context.comm = comm.get();
    context.device_comm = &device_comm;
    context.pool = &pool;
    context.kernels = &kernels;
    context.seed = 13;
    std::unique_ptr<RgnnSampledAssignment> assignment = Assignment(g, c, rank);
    const ref::RefConfig config = RefConfigOf(assignment->settings);
    auto built = (*factory)->build(std::move(assignment), context);
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    auto* executor = dynamic_cast<RgnnExecutor*>(built->get());
    ASSERT_NE(executor, nullptr);
    ParameterStore& params = executor->parameters();
    // The reference starts from Tessel's own initial parameters, with zero Adam moments.
    ref::RefParams initial = ref::RefParamShapes(ref_graph, config), zeros = initial;
    ASSERT_EQ(initial.size(), params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_TRUE(initial.contains(params.spec(i).name)) << "the reference has no " << params.spec(i).name;
      initial[params.spec(i).name] = ToRef(params.value(i));
      for (double& v : zeros[params.spec(i).name].data) v = 0;
    }
    const ref::RefStep want = ref::RefTrainStep(ref_graph, config, initial, zeros, zeros, 1);
    auto step = executor->Step(1);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    if (rank != 0) return;
    EXPECT_EQ(FindNumber(step->timings, "batches").value_or(0), 1.0) << "every training seed in one batch";
    EXPECT_NEAR(step->loss, want.loss, kLossTolerance * want.loss) << "loss";
    loss_error = std::abs(step->loss - want.loss) / want.loss;
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& name = params.spec(i).name;
      worst_gradient =
          std::max(worst_gradient, ExpectClose(DenseGradient(params, i), want.grads.at(name), "gradient of " + name));
      worst_parameter = std::max(worst_parameter,
                                 ExpectClose(params.value(i), want.params.at(name), "parameter after Adam: " + name));
    }
  });
  RecordProperty("loss_relative_error", Short(loss_error));
  RecordProperty("worst_gradient_error", Short(worst_gradient));
  RecordProperty("worst_parameter_error", Short(worst_parameter));
}

SampledCase Case(std::string name, std::string model, int32_t heads = 1, int workers = 1) {
  SampledCase c;
  c.name = std::move(name);
  c.model = model;
  c.heads = heads;
  c.workers = workers;
  return c;
}

std::vector<SampledCase> EveryNeighbourCases() {
  SampledCase one_hot = Case("RgcnOneHot", "rgcn");
  one_hot.input = ModelInput::kOneHot;
  SampledCase pairs = Case("RgcnNoReorder", "rgcn");  // RelationLayout instead of SegmentLayout
  pairs.reordering = Reordering::kOff;
  SampledCase mean = Case("Rgat2HeadsMean", "rgat", 2);
  mean.merge = HeadMerge::kMean;
  SampledCase skip = Case("Hgt2HeadsSkipTwoWorkers", "hgt", 2, 2);
  skip.feature_dim = 6;
  return {Case("Rgcn", "rgcn"),
          Case("RgcnTwoWorkers", "rgcn", 1, 2),
          one_hot,
          pairs,
          Case("Rgat2Heads", "rgat", 2),
          Case("Rgat2HeadsTwoWorkers", "rgat", 2, 2),
          mean,
          Case("Hgt2Heads", "hgt", 2),
          skip};
}

std::vector<SampledCase> TwoOfThreeCases() {
  std::vector<SampledCase> cases = EveryNeighbourCases();
  for (SampledCase& c : cases) {
    c.graph = TestGraph::kTripledGroups;
    c.fanouts = {2, 2};
    c.per_relation = true;
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryNeighbour, SampledAgainstReference, ::testing::ValuesIn(EveryNeighbourCases()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(TwoOfThreeParallelEdges, SampledAgainstReference, ::testing::ValuesIn(TwoOfThreeCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tessel::workers

// The full-graph RGNN executor, with the real plugin kernels:
//  - against the independent naive double-precision reference (reference_model.h): one epoch's loss, every
//    parameter gradient and the parameters after one Adam step, so a bug that every worker count shares
//    still fails;
//  - across worker counts: workers run as threads over ThreadComm; one and three workers must see the
//    same losses epoch by epoch, which only holds if the halo exchange and the gradient sum are right;
//  - checkpoint state: saving and loading continues training exactly.
#include "workers/rgnn/rgnn_executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <string>

#include "core/allocator.h"
#include "core/cuda_device.h"
#include "core/logging.h"
#include "core/thread_pool.h"
#include "storage/generator.h"
#include "storage/partition.h"
#include "tests/unit/workers/rgnn/executor_bridge.h"
#include "tests/unit/workers/rgnn/reference_model.h"
#include "tests/unit/workers/rgnn/thread_comm.h"
#include "workers/rgnn/layers/hgt_layer.h"

namespace tessel::workers {
namespace {

using testing::ThreadComm;
using testing::ThreadGroup;

storage::HeteroGraph SmallGraph(int64_t feature_dim, int64_t nodes = 600, int32_t relations = 3) {
  storage::GenerateOptions o;
  o.nodes = nodes;
  o.node_types = 2;
  o.relations = relations;
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

std::vector<storage::WorkerPartition> Partition(const storage::HeteroGraph& g, int parts) {
  std::vector<int32_t> part_of(static_cast<size_t>(g.num_nodes()));
  for (size_t i = 0; i < part_of.size(); ++i)
    part_of[i] = static_cast<int32_t>((i * 7 + i / 13) % static_cast<size_t>(parts));
  auto built = storage::BuildWorkerPartitions(g, part_of, parts);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  return std::move(built).value();
}

ExecutorContext Context(WorkerComm& comm, DeviceComm& device_comm, ThreadPool& pool, const KernelRegistry& kernels,
                        uint64_t seed) {
  ExecutorContext c;
  c.comm = &comm;
  c.device_comm = &device_comm;
  c.pool = &pool;
  c.kernels = &kernels;
  c.seed = seed;
  return c;
}

RgnnSettings Settings(ModelInput input, int epochs) {
  RgnnSettings s;
  s.model = "rgcn";
  s.layers = 2;
  s.input = input;
  s.hidden = 8;
  s.heads = 1;
  s.epochs = epochs;
  s.lr = 0.01;
  s.beta1 = 0.9, s.beta2 = 0.999, s.eps = 1e-8;
  s.l2 = 5e-4;
  return s;
}

struct TrainResult {
  std::vector<double> losses;  // worker 0's, per epoch
  Record eval;
};

// Trains `epochs` epochs on `parts` workers (threads). On CUDA the threads share GPU 0, each on its own
// stream, and sum their gradients through host memory (StagedDeviceComm: NCCL takes one GPU a rank).
TrainResult Train(const storage::HeteroGraph& g, int parts, const RgnnSettings& settings,
                  Device device = Device::kCpu) {
  std::vector<storage::WorkerPartition> built = Partition(g, parts);
  const KernelRegistry kernels = LoadKernels();
  ThreadGroup group(parts);
  std::vector<std::vector<double>> losses(static_cast<size_t>(parts));
  TrainResult out;
  std::mutex mu;
  ThreadGroup::Run(parts, [&](int rank) {
    ThreadComm comm(&group, rank);
    ThreadPool pool(1);
    CudaStream stream;
    std::unique_ptr<DeviceComm> device_comm = std::make_unique<HostDeviceComm>(comm);
    DeviceContext on;
    if (device == Device::kCuda) {
      ASSERT_TRUE(SelectCudaDevice(0).ok());
      Result<CudaStream> made = CudaStream::Create();
      ASSERT_TRUE(made.ok()) << made.status().ToString();
      stream = std::move(*made);
      on = {Device::kCuda, 0, stream.get(), &CudaAllocator()};
      device_comm = std::make_unique<StagedDeviceComm>(comm, stream.get());
    }
    ExecutorContext context = Context(comm, *device_comm, pool, kernels, 5);
    context.device = on;
    auto executor = RgnnExecutor::Create(settings, std::move(built[static_cast<size_t>(rank)]), context);
    ASSERT_TRUE(executor.ok()) << executor.status().ToString();
    for (int e = 1; e <= settings.epochs; ++e) {
      auto step = (*executor)->Step(e);
      ASSERT_TRUE(step.ok()) << step.status().ToString();
      losses[static_cast<size_t>(rank)].push_back(step->loss);
    }
    auto eval = (*executor)->Evaluate();
    ASSERT_TRUE(eval.ok()) << eval.status().ToString();
    std::lock_guard<std::mutex> lock(mu);
    if (rank == 0) out.eval = *eval;
  });
  for (int r = 1; r < parts; ++r)
    EXPECT_EQ(losses[static_cast<size_t>(r)], losses[0]) << "workers disagree on the loss";
  out.losses = losses[0];
  return out;
}

void ExpectSameLosses(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t e = 0; e < a.size(); ++e) EXPECT_NEAR(a[e], b[e], 2e-5 * std::abs(a[e]) + 1e-7) << "epoch " << e + 1;
}

TEST(RgnnExecutor, ThreeWorkersMatchOneWorkerWithFeatures) {
  const auto g = SmallGraph(6);
  const TrainResult one = Train(g, 1, Settings(ModelInput::kFeatures, 12));
  const TrainResult three = Train(g, 3, Settings(ModelInput::kFeatures, 12));
  ExpectSameLosses(one.losses, three.losses);
  EXPECT_EQ(FindNumber(one.eval, "test_total"), FindNumber(three.eval, "test_total"));
  EXPECT_EQ(FindNumber(one.eval, "test_correct"), FindNumber(three.eval, "test_correct"));
}

TEST(RgnnExecutor, ThreeWorkersMatchOneWorkerWithOneHotInput) {
  const auto g = SmallGraph(0);
  ExpectSameLosses(Train(g, 1, Settings(ModelInput::kOneHot, 12)).losses,
                   Train(g, 3, Settings(ModelInput::kOneHot, 12)).losses);
}

TEST(RgnnExecutor, LearnsThePlantedStructure) {
  const auto g = SmallGraph(6);
  const TrainResult r = Train(g, 2, Settings(ModelInput::kFeatures, 60));
  EXPECT_LT(r.losses.back(), 0.5 * r.losses.front());
  EXPECT_GT(FindNumber(r.eval, "test_accuracy").value_or(0), 2.0 / 3.0) << "3 classes: chance is 1/3";
}

TEST(RgnnExecutor, FeatureInputWithoutFeaturesIsRefused) {
  const auto g = SmallGraph(0);
  std::vector<storage::WorkerPartition> parts = Partition(g, 1);
  const KernelRegistry kernels = LoadKernels();
  LocalComm comm;
  HostDeviceComm device_comm(comm);
  ThreadPool pool(1);
  auto executor = RgnnExecutor::Create(Settings(ModelInput::kFeatures, 1), std::move(parts[0]),
                                       Context(comm, device_comm, pool, kernels, 0));
  ASSERT_FALSE(executor.ok());
  EXPECT_EQ(executor.status().code(), Code::kUsage);
}

// A part that fails its own checks stops every worker, each with an error, before any exchange: none of
// its peers waits for it (here a wait would hang the test).
TEST(RgnnExecutor, ABadPartStopsEveryWorkerBeforeTheExchange) {
  const auto g = SmallGraph(6);
  std::vector<storage::WorkerPartition> parts = Partition(g, 3);
  parts[1].labels.pop_back();
  const KernelRegistry kernels = LoadKernels();
  ThreadGroup group(3);
  std::vector<Status> got(3);
  ThreadGroup::Run(3, [&](int rank) {
    ThreadComm comm(&group, rank);
    HostDeviceComm device_comm(comm);
    ThreadPool pool(1);
    auto executor =
        RgnnExecutor::Create(Settings(ModelInput::kFeatures, 1), std::move(parts[static_cast<size_t>(rank)]),
                             Context(comm, device_comm, pool, kernels, 0));
    got[static_cast<size_t>(rank)] = executor.status();
  });
  for (const Status& st : got) EXPECT_EQ(st.code(), Code::kBadData) << st.ToString();
  EXPECT_NE(got[1].message().find("labels or masks do not cover"), std::string::npos) << got[1].ToString();
  EXPECT_NE(got[0].message().find("worker(s) 1 failed"), std::string::npos) << got[0].ToString();
  EXPECT_NE(got[2].message().find("worker(s) 1 failed"), std::string::npos) << got[2].ToString();
}

// --- Against the independent reference -------------------------------------------------------------

// Elementwise |a - b| <= tol * (|b| + 5e-2 * max|b|): relative, with a floor scaled to the tensor
// (float sums through softmax backward lose ~1e-6 of the largest entry on entries that cancel).
// `slack`, when given, adds to entry i's allowance.
void ExpectClose(const Tensor& actual, const ::tessel::testing::RefTensor& expected, double tol,
                 const std::string& what, const std::vector<double>& slack = {}) {
  ASSERT_EQ(actual.shape(), expected.shape) << what;
  double scale = 0;
  for (double v : expected.data) scale = std::max(scale, std::abs(v));
  int reported = 0;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const double a = actual.dtype() == DType::kF64 ? actual.data<double>()[i] : actual.data<float>()[i];
    const double b = expected.data[static_cast<size_t>(i)];
    const double extra = slack.empty() ? 0.0 : slack[static_cast<size_t>(i)];
    if (!(std::abs(a - b) <= tol * (std::abs(b) + 5e-2 * scale) + extra) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << a << ", the reference says " << b << " (largest " << scale
                    << ")";
    }
  }
}

// What the gradient's allowed error (ExpectClose at `tol`) can move a parameter in Adam's first step,
// lr * g / (|g| + eps): by lr * eps / (|g| + eps)^2 per unit of gradient error. Near |g| ~ eps that is
// ~lr / (4 eps) (a float gradient of 1e-7, 1e-3 off, moves the step by 6e-6): the step is then only as
// exact as the gradient, which the gradient check has already bounded. (Found by an HGT case with biases:
// a rel_att gradient of -9.11e-8 against the reference's -9.13e-8.)
std::vector<double> AdamSlack(const ::tessel::testing::RefTensor& grad, const ::tessel::testing::RefTensor& initial,
                              double decay, double lr, double tol) {
  const double eps = 1e-8;
  double scale = 0;
  for (double v : grad.data) scale = std::max(scale, std::abs(v));
  std::vector<double> slack(grad.data.size());
  for (size_t i = 0; i < slack.size(); ++i) {
    const double g = std::abs(grad.data[i] + decay * initial.data[i]);
    // Two first steps differ by 2 lr at most.
    slack[i] = std::min(2 * lr, lr * eps / ((g + eps) * (g + eps)) * tol * (std::abs(grad.data[i]) + 5e-2 * scale));
  }
  return slack;
}

struct ReferenceCase {
  ModelInput input;
  int layers;
  int workers;
  int32_t num_bases = 0;
  int32_t num_blocks = 0;
  Reordering reordering = Reordering::kOn;
  Compaction compaction = Compaction::kPerUniquePair;
  std::string model = "rgcn";
  int32_t heads = 1;
  HeadMerge merge = HeadMerge::kConcat;
  int64_t feature_dim = 5;
  bool bias = false;
  WeightInit init = WeightInit::kGlorot;
  Precision precision = Precision::kFp32;
  HaloMode halo = HaloMode::kResident;
};

// The case with a streamed halo (train.halo): each peer's block of rows run as it arrives, none kept.
ReferenceCase Streamed(ReferenceCase c) {
  c.halo = HaloMode::kStreamed;
  return c;
}

// The case run by the executor in double (train.precision = "fp64"): the plugin kernels' double
// instantiations, through the layers, the loss and Adam, held to the double reference at 1e-10.
ReferenceCase InDouble(ReferenceCase c) {
  c.precision = Precision::kFp64;
  return c;
}

ReferenceCase Rgat(ModelInput input, int layers, int workers, int32_t heads, HeadMerge merge,
                   Reordering reordering = Reordering::kOn, Compaction compaction = Compaction::kPerUniquePair) {
  ReferenceCase c{input, layers, workers, 0, 0, reordering, compaction};
  c.model = "rgat";
  c.heads = heads;
  c.merge = merge;
  return c;
}

ReferenceCase Hgt(ModelInput input, int layers, int workers, int32_t heads, int64_t feature_dim,
                  Reordering reordering = Reordering::kOn, Compaction compaction = Compaction::kPerUniquePair) {
  ReferenceCase c{input, layers, workers, 0, 0, reordering, compaction};
  c.model = "hgt";
  c.heads = heads;
  c.feature_dim = feature_dim;
  return c;
}

// HGT with PyG's HGTConv biases, drawn as torch.nn.Linear draws them (not zero, so the forward uses them).
ReferenceCase HgtBias(ModelInput input, int layers, int workers, int32_t heads, int64_t feature_dim,
                      WeightInit init = WeightInit::kTorchLinear) {
  ReferenceCase c = Hgt(input, layers, workers, heads, feature_dim);
  c.bias = true;
  c.init = init;
  return c;
}

std::string CaseName(const ReferenceCase& c) {
  return std::string(c.input == ModelInput::kOneHot ? "OneHot" : "Features") + std::to_string(c.layers) + "Layers" +
         std::to_string(c.workers) + "Workers" + (c.num_bases > 0 ? "Bases" : "") + (c.num_blocks > 0 ? "Blocks" : "") +
         (c.heads > 1 ? std::to_string(c.heads) + "Heads" : "") + (c.merge == HeadMerge::kMean ? "Mean" : "") +
         (c.feature_dim == 6 ? "Skip" : "") + (c.reordering == Reordering::kOff ? "NoReorder" : "") +
         (c.compaction == Compaction::kPerEdge ? "PerEdge" : "") + (c.bias ? "Bias" : "") +
         (c.init == WeightInit::kTorchLinear ? "TorchLinear" : "") +
         (c.precision == Precision::kFp64 ? "Fp64" + c.model : "") +  // one suite holds every model
         (c.halo == HaloMode::kStreamed ? "Streamed" : "");
}

class AgainstReference : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(AgainstReference, OneEpochMatchesLossGradientsAndAdamStep) {
  const ReferenceCase c = GetParam();
  const bool one_hot = c.input == ModelInput::kOneHot;
  const auto g = SmallGraph(one_hot ? 0 : c.feature_dim, 60, 2);
  RgnnSettings settings = Settings(c.input, 1);
  settings.layers = c.layers;
  settings.hidden = 6;
  settings.lr = 0.05;
  settings.l2 = 0.01;
  settings.num_bases = c.num_bases;
  settings.num_blocks = c.num_blocks;
  settings.reordering = c.reordering;
  settings.compaction = c.compaction;
  settings.model = c.model;
  settings.heads = c.heads;
  settings.head_merge = c.merge;
  if (c.bias) Set(settings.options, kHgtBias.key, true);
  settings.weight_init = c.init;
  settings.precision = c.precision;
  settings.halo = c.halo;
  // Float sums in other orders are a few roundings off (measured: 1e-8 of the loss, 1e-6 of a gradient);
  // in double, 1e-15: a planted error of 1e-9 in one gradient path is caught.
  const bool fp64 = c.precision == Precision::kFp64;
  const double tol = fp64 ? 1e-10 : 1e-4, loss_tol = fp64 ? 1e-12 : 1e-5;
  const ::tessel::testing::RefConfig config = RefConfigOf(settings);
  const ::tessel::testing::RefGraph ref_graph = ToRefGraph(g, one_hot);

  std::vector<storage::WorkerPartition> parts = Partition(g, c.workers);
  const KernelRegistry kernels = LoadKernels();
  ThreadGroup group(c.workers);
  ThreadGroup::Run(c.workers, [&](int rank) {
    ThreadComm comm(&group, rank);
    HostDeviceComm device_comm(comm);
    ThreadPool pool(2);
    auto made = RgnnExecutor::Create(settings, std::move(parts[static_cast<size_t>(rank)]),
                                     Context(comm, device_comm, pool, kernels, 17));
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    RgnnExecutor& executor = **made;
    ParameterStore& params = executor.parameters();
    ASSERT_EQ(params.dtype(), fp64 ? DType::kF64 : DType::kF32);
    // The reference starts from Tessel's own initial parameters.
    ::tessel::testing::RefParams initial = ::tessel::testing::RefParamShapes(ref_graph, config), zeros = initial;
    ASSERT_EQ(initial.size(), params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_TRUE(initial.contains(params.spec(i).name)) << "the reference has no " << params.spec(i).name;
      initial[params.spec(i).name] = ToRef(params.value(i));
      for (double& v : zeros[params.spec(i).name].data) v = 0;
    }
    const ::tessel::testing::RefStep want =
        ::tessel::testing::RefTrainStep(ref_graph, config, initial, zeros, zeros, 1);
    auto step = executor.Step(1);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    if (rank != 0) {
      return;
    }
    EXPECT_NEAR(step->loss, want.loss, loss_tol * want.loss) << "loss";
    int row_gradients = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& name = params.spec(i).name;
      ExpectClose(DenseGradient(params, i), want.grads.at(name), tol, "gradient of " + name);
      row_gradients += params.spec(i).row_gradient();
      const double decay = params.spec(i).decay == Decay::kL2 ? L2Decay(settings.l2) : 0.0;
      ExpectClose(params.value(i), want.params.at(name), tol, "parameter after Adam: " + name,
                  AdamSlack(want.grads.at(name), initial.at(name), decay, settings.lr, tol));
    }
    // RGCN's one-hot layer keeps its gradient as rows exactly when it can (one worker, full weights, fused).
    const bool rows = c.model == "rgcn" && one_hot && c.workers == 1 && c.num_bases == 0 && c.num_blocks == 0 &&
                      c.reordering == Reordering::kOn;
    EXPECT_EQ(row_gradients, rows ? 1 : 0);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Rgcn, AgainstReference,
    ::testing::Values(ReferenceCase{ModelInput::kFeatures, 2, 1}, ReferenceCase{ModelInput::kFeatures, 2, 3},
                      ReferenceCase{ModelInput::kOneHot, 2, 1}, ReferenceCase{ModelInput::kOneHot, 1, 2},
                      ReferenceCase{ModelInput::kFeatures, 3, 2}, ReferenceCase{ModelInput::kFeatures, 2, 2, 3, 0},
                      ReferenceCase{ModelInput::kOneHot, 2, 1, 2, 0}, ReferenceCase{ModelInput::kFeatures, 2, 2, 0, 3},
                      ReferenceCase{ModelInput::kFeatures, 2, 2, 0, 0, Reordering::kOff},
                      ReferenceCase{ModelInput::kOneHot, 2, 1, 0, 0, Reordering::kOff},
                      ReferenceCase{ModelInput::kFeatures, 2, 2, 0, 0, Reordering::kOn, Compaction::kPerEdge},
                      ReferenceCase{ModelInput::kOneHot, 2, 2, 0, 0, Reordering::kOff, Compaction::kPerEdge}),
    [](const auto& info) { return CaseName(info.param); });

INSTANTIATE_TEST_SUITE_P(Rgat, AgainstReference,
                         ::testing::Values(Rgat(ModelInput::kFeatures, 2, 1, 1, HeadMerge::kConcat),
                                           Rgat(ModelInput::kFeatures, 2, 3, 2, HeadMerge::kConcat),
                                           Rgat(ModelInput::kFeatures, 2, 2, 2, HeadMerge::kMean),
                                           Rgat(ModelInput::kOneHot, 2, 1, 2, HeadMerge::kConcat),
                                           Rgat(ModelInput::kFeatures, 3, 2, 3, HeadMerge::kConcat, Reordering::kOff),
                                           Rgat(ModelInput::kOneHot, 1, 2, 2, HeadMerge::kMean),
                                           Rgat(ModelInput::kFeatures, 2, 2, 2, HeadMerge::kConcat, Reordering::kOn,
                                                Compaction::kPerEdge)),
                         [](const auto& info) { return CaseName(info.param); });

INSTANTIATE_TEST_SUITE_P(
    Hgt, AgainstReference,
    ::testing::Values(Hgt(ModelInput::kFeatures, 2, 1, 1, 5), Hgt(ModelInput::kFeatures, 2, 3, 2, 6),
                      Hgt(ModelInput::kOneHot, 2, 1, 2, 0), Hgt(ModelInput::kFeatures, 1, 2, 3, 6),
                      Hgt(ModelInput::kFeatures, 2, 2, 2, 5, Reordering::kOff),
                      Hgt(ModelInput::kFeatures, 2, 2, 2, 6, Reordering::kOn, Compaction::kPerEdge),
                      HgtBias(ModelInput::kFeatures, 2, 2, 2, 6), HgtBias(ModelInput::kOneHot, 2, 2, 2, 0),
                      HgtBias(ModelInput::kFeatures, 1, 1, 1, 5, WeightInit::kGlorot)),
    [](const auto& info) { return CaseName(info.param); });

// A streamed halo against the same reference: RGCN's fused path with every input, decomposition and
// compaction, on 2 and 3 workers (with one there is no halo).
INSTANTIATE_TEST_SUITE_P(Streamed, AgainstReference,
                         ::testing::Values(Streamed(ReferenceCase{ModelInput::kFeatures, 2, 2}),
                                           Streamed(ReferenceCase{ModelInput::kFeatures, 2, 3}),
                                           Streamed(ReferenceCase{ModelInput::kFeatures, 3, 3}),
                                           Streamed(ReferenceCase{ModelInput::kOneHot, 2, 2}),
                                           Streamed(ReferenceCase{ModelInput::kFeatures, 2, 3, 3, 0}),
                                           Streamed(ReferenceCase{ModelInput::kFeatures, 2, 2, 0, 3}),
                                           Streamed(ReferenceCase{ModelInput::kFeatures, 2, 3, 0, 0, Reordering::kOn,
                                                                  Compaction::kPerEdge})),
                         [](const auto& info) { return CaseName(info.param); });

// One worker (fp64 is full-graph training on one worker): every model and kernel path of the suites above.
INSTANTIATE_TEST_SUITE_P(
    Fp64, AgainstReference,
    ::testing::Values(
        InDouble(ReferenceCase{ModelInput::kFeatures, 2, 1}), InDouble(ReferenceCase{ModelInput::kOneHot, 2, 1}),
        InDouble(ReferenceCase{ModelInput::kFeatures, 3, 1, 3, 0}),
        InDouble(ReferenceCase{ModelInput::kOneHot, 2, 1, 2, 0}),
        InDouble(ReferenceCase{ModelInput::kFeatures, 2, 1, 0, 3}),
        InDouble(ReferenceCase{ModelInput::kOneHot, 2, 1, 0, 0, Reordering::kOff}),
        InDouble(ReferenceCase{ModelInput::kFeatures, 2, 1, 0, 0, Reordering::kOn, Compaction::kPerEdge}),
        InDouble(Rgat(ModelInput::kFeatures, 2, 1, 2, HeadMerge::kConcat)),
        InDouble(Rgat(ModelInput::kFeatures, 2, 1, 2, HeadMerge::kMean)),
        InDouble(Rgat(ModelInput::kOneHot, 2, 1, 2, HeadMerge::kConcat)),
        InDouble(Rgat(ModelInput::kFeatures, 3, 1, 3, HeadMerge::kConcat, Reordering::kOff)),
        InDouble(Rgat(ModelInput::kFeatures, 2, 1, 2, HeadMerge::kConcat, Reordering::kOn, Compaction::kPerEdge)),
        InDouble(Hgt(ModelInput::kFeatures, 2, 1, 2, 6)), InDouble(Hgt(ModelInput::kOneHot, 2, 1, 2, 0)),
        InDouble(Hgt(ModelInput::kFeatures, 2, 1, 2, 5, Reordering::kOff)),
        InDouble(HgtBias(ModelInput::kFeatures, 2, 1, 2, 6))),
    [](const auto& info) { return CaseName(info.param); });

// --- On the GPU ---------------------------------------------------------------------------------------

// Full-graph training on the GPU gives the CPU's losses (1e-4 relative, as scripts/device-check.sh holds
// the AIFB runs), with the halo resident and streamed (its blocks staged through the device buffers), on
// 1, 2 and 3 workers, and RGAT and HGT with their halo resident. Skipped without a usable GPU; the
// device check runs it with TESSEL_REQUIRE_GPU=1.
TEST(RgnnExecutorCuda, FullGraphTrainingOnTheGpuGivesTheCpuLosses) {
  if (!ProbeCuda().usable()) GTEST_SKIP() << "no usable GPU: " << ProbeCuda().problem;
  const auto g = SmallGraph(6);
  struct Case {
    std::string model;
    HaloMode halo;
    int workers;
  };
  for (const Case& c : {Case{"rgcn", HaloMode::kResident, 1}, Case{"rgcn", HaloMode::kResident, 3},
                        Case{"rgcn", HaloMode::kStreamed, 2}, Case{"rgcn", HaloMode::kStreamed, 3},
                        Case{"rgat", HaloMode::kResident, 2}, Case{"hgt", HaloMode::kResident, 2}}) {
    RgnnSettings settings = Settings(ModelInput::kFeatures, 5);
    settings.model = c.model;
    settings.heads = c.model == "rgcn" ? 1 : 2;
    settings.halo = c.halo;
    const std::string what =
        StrCat(c.model, c.halo == HaloMode::kStreamed ? " streamed" : " resident", " on ", c.workers, " workers");
    const TrainResult cpu = Train(g, c.workers, settings);
    const TrainResult gpu = Train(g, c.workers, settings, Device::kCuda);
    ASSERT_EQ(cpu.losses.size(), gpu.losses.size()) << what;
    for (size_t e = 0; e < cpu.losses.size(); ++e) {
      EXPECT_NEAR(gpu.losses[e], cpu.losses[e], 1e-4 * std::abs(cpu.losses[e])) << what << ", epoch " << e + 1;
    }
    EXPECT_EQ(FindNumber(gpu.eval, "test_total"), FindNumber(cpu.eval, "test_total")) << what;
  }
}

// --- Checkpoint state ---------------------------------------------------------------------------------

TEST(RgnnExecutor, SavedStateContinuesExactlyInAFreshExecutor) {
  const auto g = SmallGraph(6);
  const KernelRegistry kernels = LoadKernels();
  LocalComm comm;
  HostDeviceComm device_comm(comm);
  ThreadPool pool(2);
  const RgnnSettings settings = Settings(ModelInput::kFeatures, 6);
  auto first = RgnnExecutor::Create(settings, Partition(g, 1)[0], Context(comm, device_comm, pool, kernels, 3));
  ASSERT_TRUE(first.ok());
  std::vector<double> straight;
  MemoryState state;
  for (int e = 1; e <= 6; ++e) {
    straight.push_back((*first)->Step(e).value().loss);
    if (e == 3) {
      ASSERT_TRUE((*first)->SaveState(state).ok());
    }
  }
  // A fresh executor from another seed (so different initial parameters) picks up at epoch 4.
  auto second = RgnnExecutor::Create(settings, Partition(g, 1)[0], Context(comm, device_comm, pool, kernels, 99));
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*second)->LoadState(state).ok());
  for (int e = 4; e <= 6; ++e) {
    EXPECT_EQ((*second)->Step(e).value().loss, straight[static_cast<size_t>(e - 1)]) << e;
  }
  // A state that lacks a tensor is a storage error, not a silent restart.
  MemoryState empty;
  EXPECT_EQ((*second)->LoadState(empty).code(), Code::kStorage);
}

}  // namespace
}  // namespace tessel::workers

// rgnn_parity_export: Tessel's side of the first-epoch parity check against the PyTorch reference trainers
// (bench/peers/rgnn_reference.py parity, run by tests/integration/rgnn_parity.sh).
//
//   rgnn_parity_export OUT_DIR NAME [model=rgcn|rgat|hgt] [input=onehot|features] [layers=2] [hidden=6]
//                      [heads=1] [merge=concat|mean] [bases=0] [blocks=0] [bias=0|1] [init=glorot|torch_linear]
//                      [feature_dim=6] [lr=0.05] [l2=0.01] [seed=17] [graph=FILE init_only=1]
//
// It generates a small heterogeneous graph (40 nodes, 2 node types, 2 base relations with their inverses
// and self-loops, 3 classes) and writes it as a Tessel graph file, OUT_DIR/NAME.h5. It builds Tessel's
// full-graph RGNN executor on it (one worker, the real plugin kernels) and takes the executor's initial
// parameters, as drawn from the job seed. From them it computes one epoch in double precision with the
// naive reference of MODELS.md (reference_model.h: the loss, every gradient, the Adam step), then runs the
// executor's own first epoch in float, and in double (train.precision = "fp64", from the same initial
// values widened). It writes OUT_DIR/NAME.json:
//   model settings, "graph" (the file), "loss" (double), "tessel_f32_loss", "l2_decay" (the coefficient of
//   the coupled decay Tessel's Adam adds, L2Decay(l2)), and per parameter: name, shape, "decayed" (whether
//   Tessel's Adam decays it), "initial", "grad" and "after_step" (double), "tessel_f32_grad" and
//   "tessel_f32_after_step", "tessel_f64_grad" and "tessel_f64_after_step"; and "tessel_f64_loss".
// The reference trainer reads both files, computes the same epoch in float64 from the same initial
// parameters and compares.
// With graph=FILE and init_only=1 it reads that graph file instead, and writes only Tessel's initial
// parameters for job.seed = seed, as a `tessel run` of the same model starts from them: OUT_DIR/NAME.json
// (per parameter: name, shape, offset) and OUT_DIR/NAME.bin (every value, float32, in that order). The
// accuracy benchmark starts the reference trainer from them (rgnn_reference.py train --init).
// Exit 0 when written, 1 on any failure (with the reason on stderr).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>

#include "core/json.h"
#include "core/thread_pool.h"
#include "storage/generator.h"
#include "storage/partition.h"
#include "tests/unit/workers/rgnn/executor_bridge.h"
#include "tests/unit/workers/rgnn/reference_model.h"
#include "tests/unit/workers/rgnn/thread_comm.h"
#include "workers/rgnn/layers/hgt_layer.h"
#include "workers/rgnn/rgnn_executor.h"

namespace tessel::workers {
namespace {

namespace ref = ::tessel::testing;

Json Values(const std::vector<double>& v) { return Json(v); }
Json Values(const Tensor& t) { return Values(ToRef(t).data); }

// NAME.json (the index) and NAME.bin (the float32 values) of the initial parameters.
Status WriteInitialState(const ParameterStore& params, const std::string& stem) {
  Json index = Json::array();
  std::ofstream bin(stem + ".bin", std::ios::binary);
  int64_t offset = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& v = params.value(i);
    index.push_back(Json{{"name", params.spec(i).name}, {"shape", params.spec(i).shape}, {"offset", offset}});
    bin.write(static_cast<const char*>(v.raw()), static_cast<std::streamsize>(v.numel() * sizeof(float)));
    offset += v.numel();
  }
  bin.close();
  std::ofstream out(stem + ".json");
  out << FormatJson(index, JsonLayout::kCompact) << "\n";
  out.close();
  if (!bin || !out) return StorageError("cannot write " + stem + ".json / .bin");
  return Status();
}

Status Export(const std::string& dir, const std::string& name, const std::map<std::string, std::string>& opt) {
  auto get = [&](const std::string& key, const std::string& fallback) {
    auto it = opt.find(key);
    return it == opt.end() ? fallback : it->second;
  };
  const std::string model = get("model", "rgcn");
  const std::string graph_file = get("graph", "");
  const bool init_only = get("init_only", "0") == "1";
  if (init_only != !graph_file.empty()) return UsageError("graph=FILE and init_only=1 go together");
  const bool one_hot = get("input", "features") == "onehot";
  RgnnSettings s;
  s.model = model;
  s.layers = std::stoi(get("layers", "2"));
  s.hidden = std::stoi(get("hidden", "6"));
  s.input = one_hot ? ModelInput::kOneHot : ModelInput::kFeatures;
  s.num_bases = std::stoi(get("bases", "0"));
  s.num_blocks = std::stoi(get("blocks", "0"));
  s.heads = std::stoi(get("heads", "1"));
  s.head_merge = get("merge", "concat") == "mean" ? HeadMerge::kMean : HeadMerge::kConcat;
  if (get("bias", "0") == "1") Set(s.options, kHgtBias.key, true);
  const std::optional<WeightInit> init = ChoiceNamed<WeightInit>(get("init", "glorot"));
  if (!init) return UsageError("init=" + get("init", "glorot") + ": not \"glorot\" or \"torch_linear\"");
  s.weight_init = *init;
  s.compaction = Compaction::kPerUniquePair;
  s.reordering = Reordering::kOn;
  s.epochs = 1;
  s.lr = std::stod(get("lr", "0.05"));
  s.beta1 = 0.9, s.beta2 = 0.999, s.eps = 1e-8;
  s.l2 = std::stod(get("l2", "0.01"));

  storage::GenerateOptions o;
  o.nodes = 40;
  o.node_types = 2;
  o.relations = 2;
  o.classes = 3;
  o.avg_degree = 3;
  o.feature_dim = one_hot ? 0 : std::stoll(get("feature_dim", "6"));
  o.train_fraction = 0.5;
  o.test_fraction = 0.3;
  o.seed = 11;
  o.name = name;
  storage::HeteroGraph g;
  std::string graph_path = graph_file;
  if (init_only) {
    TESSEL_ASSIGN_OR_RETURN(g, storage::ReadGraph(graph_file));
  } else {
    TESSEL_ASSIGN_OR_RETURN(g, storage::GenerateGraph(o));
    graph_path = dir + "/" + name + ".h5";
    TESSEL_RETURN_IF_ERROR(storage::WriteGraph(g, graph_path));
  }

  const ref::RefConfig config = RefConfigOf(s);
  const ref::RefGraph ref_graph = ToRefGraph(g, one_hot);

  std::vector<int32_t> part_of(static_cast<size_t>(g.num_nodes()), 0);
  TESSEL_ASSIGN_OR_RETURN(std::vector<storage::WorkerPartition> parts, storage::BuildWorkerPartitions(g, part_of, 1));
  KernelRegistry kernels;
  for (const char* plugin : {"libtessel_nn.so", "libtessel_rgnn.so"}) {
    TESSEL_RETURN_IF_ERROR(kernels.LoadPlugin(std::string(TESSEL_BINARY_DIR) + "/plugins/" + plugin));
  }
  testing::ThreadGroup group(1);
  testing::ThreadComm comm(&group, 0);
  HostDeviceComm device_comm(comm);
  ThreadPool pool(1);
  ExecutorContext context;
  context.comm = &comm;
  context.device_comm = &device_comm;
  context.pool = &pool;
  context.kernels = &kernels;
  context.seed = std::stoull(get("seed", "17"));
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<RgnnExecutor> executor,
                          RgnnExecutor::Create(s, std::move(parts[0]), context));
  ParameterStore& params = executor->parameters();
  if (init_only) return WriteInitialState(params, dir + "/" + name);

  // The reference starts from Tessel's initial parameters, widened to double.
  ref::RefParams initial = ref::RefParamShapes(ref_graph, config), zeros = initial;
  if (initial.size() != params.size()) return InternalError("the reference and Tessel declare different parameters");
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& p = params.spec(i).name;
    if (!initial.contains(p)) return InternalError("the reference has no " + p);
    initial[p] = ToRef(params.value(i));
    for (double& v : zeros[p].data) v = 0;
  }
  const ref::RefStep want = ref::RefTrainStep(ref_graph, config, initial, zeros, zeros, 1);

  // The same executor in double (train.precision = "fp64": the kernels' double instantiations), started
  // from the float executor's initial values widened, so that all three start from the same point.
  RgnnSettings wide = s;
  wide.precision = Precision::kFp64;
  TESSEL_ASSIGN_OR_RETURN(std::vector<storage::WorkerPartition> parts64, storage::BuildWorkerPartitions(g, part_of, 1));
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<RgnnExecutor> executor64,
                          RgnnExecutor::Create(wide, std::move(parts64[0]), context));
  ParameterStore& params64 = executor64->parameters();
  if (params64.size() != params.size() || params64.dtype() != DType::kF64) {
    return InternalError("the fp64 executor does not declare the float executor's parameters in f64");
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<double>& v = initial.at(params.spec(i).name).data;
    std::copy(v.begin(), v.end(), params64.value(i).data<double>());
  }
  TESSEL_ASSIGN_OR_RETURN(StepResult step64, executor64->Step(1));
  TESSEL_ASSIGN_OR_RETURN(StepResult step, executor->Step(1));

  Json doc = Json::object();
  doc["graph"] = graph_path;
  doc["model"] = model;
  doc["input"] = one_hot ? "onehot" : "features";
  doc["layers"] = s.layers;
  doc["hidden"] = s.hidden;
  doc["heads"] = s.heads;
  doc["head_merge"] = s.head_merge == HeadMerge::kMean ? "mean" : "concat";
  doc["num_bases"] = s.num_bases;
  doc["num_blocks"] = s.num_blocks;
  doc["bias"] = kHgtBias.Of<bool>(s.options);
  doc["weight_init"] = std::string(NameOf(s.weight_init));
  doc["lr"] = s.lr;
  doc["l2"] = s.l2;
  doc["l2_decay"] = L2Decay(s.l2);
  doc["loss"] = want.loss;
  doc["tessel_f32_loss"] = step.loss;
  doc["tessel_f64_loss"] = step64.loss;
  Json list = Json::array();
  for (size_t i = 0; i < params.size(); ++i) {
    const ParameterSpec& spec = params.spec(i);
    Json p = Json::object();
    p["name"] = spec.name;
    p["shape"] = spec.shape;
    p["decayed"] = spec.decay == Decay::kL2;
    p["initial"] = Values(initial.at(spec.name).data);
    p["grad"] = Values(want.grads.at(spec.name).data);
    p["after_step"] = Values(want.params.at(spec.name).data);
    p["tessel_f32_grad"] = Values(DenseGradient(params, i));
    p["tessel_f32_after_step"] = Values(params.value(i));
    p["tessel_f64_grad"] = Values(DenseGradient(params64, i));
    p["tessel_f64_after_step"] = Values(params64.value(i));
    list.push_back(std::move(p));
  }
  doc["params"] = std::move(list);
  std::ofstream out(dir + "/" + name + ".json");
  out << FormatJson(doc, JsonLayout::kCompact) << "\n";
  out.close();
  if (!out) return StorageError("cannot write " + dir + "/" + name + ".json");
  return Status();
}

}  // namespace
}  // namespace tessel::workers

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: rgnn_parity_export OUT_DIR NAME [key=value ...] (see the top of rgnn_parity_export.cc)\n";
    return 1;
  }
  std::map<std::string, std::string> opt;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    if (eq == std::string::npos) {
      std::cerr << "rgnn_parity_export: '" << a << "' is not key=value\n";
      return 1;
    }
    opt[a.substr(0, eq)] = a.substr(eq + 1);
  }
  try {
    const tessel::Status st = tessel::workers::Export(argv[1], argv[2], opt);
    if (!st.ok()) {
      std::cerr << "rgnn_parity_export " << argv[2] << ": " << st.ToString() << "\n";
      return 1;
    }
  } catch (const std::exception& e) {  // std::stoi and the reference's std::invalid_argument
    std::cerr << "rgnn_parity_export " << argv[2] << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}

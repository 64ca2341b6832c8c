// Every choice a job makes, each one enum bound to its names once (DESIGN.md "Executors": "A choice is one
// enum in one header"). The job file spells them with these names (jobs/schema.cc reads NamesOf), the wire
// carries them as their int32 value (core/fields.h checks the range), and logs print NameOf. Layers below
// jobs/ and workers/ use the same enums: there is no mirror to convert to.
//
// The model is not among them: it is an open set, declared where it is registered (an RGNN model in
// workers/rgnn/model_registry.h, the one GPT in jobs/spec.h's kGptModelName), so that a new model is its
// layer file and its ops (DESIGN.md "Executors"), not an edit here.
//
// A value that a job file cannot spell but a resolved setting can hold (FeatureStoreChoice::kMemory) is
// named after the ones the file takes; its field in jobs/schema.cc lists the names the file may use.
// Thread safety: constants. Failure: none (NameOf of a value out of range is "?").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

namespace tessel {

#define TESSEL_CHOICE_NAMES(Enum, ...)                                \
  inline constexpr std::string_view k##Enum##Names[] = {__VA_ARGS__}; \
  constexpr std::span<const std::string_view> NamesOf(Enum) { return k##Enum##Names; }

enum class JobKind : int32_t { kRgnn, kLlm };
TESSEL_CHOICE_NAMES(JobKind, "rgnn", "llm")

enum class DeviceChoice : int32_t { kAuto, kCpu, kCuda };
TESSEL_CHOICE_NAMES(DeviceChoice, "auto", "cpu", "cuda")

enum class DataFormat : int32_t {
  kGraph,       // an existing Tessel graph file (.h5)
  kRdf,         // RDF N-Triples plus train/test label TSVs (e.g. AIFB), imported on first use
  kEdges,       // TSV edge lists, imported on first use
  kSynthetic,   // generated from [data.synthetic]
  kPartitions,  // the part files of `tessel partition` ([data] partitions): each worker reads its own
  // llm jobs:
  kText,           // a raw text file, each byte one token ([data] text)
  kLlmc,           // llm.c token files ([data] train_tokens, val_tokens)
  kGeneratedText,  // text generated in memory ([data] generated_bytes, data.synthetic.seed)
};
TESSEL_CHOICE_NAMES(DataFormat, "graph", "rdf", "edges", "synthetic", "partitions", "text", "llmc", "generated_text")

enum class PartitionMethod : int32_t { kMetis, kRandom, kRange };
TESSEL_CHOICE_NAMES(PartitionMethod, "metis", "random", "range")

// The least severe log line printed (core/logging.h).
enum class LogLevel : int32_t { kDebug, kInfo, kWarn, kError };
TESSEL_CHOICE_NAMES(LogLevel, "debug", "info", "warn", "error")

// The first layer's input; the planner resolves kAuto, so a worker sees kFeatures or kOneHot.
enum class ModelInput : int32_t { kAuto, kFeatures, kOneHot };
TESSEL_CHOICE_NAMES(ModelInput, "auto", "features", "onehot")

enum class HeadMerge : int32_t { kConcat, kMean };
TESSEL_CHOICE_NAMES(HeadMerge, "concat", "mean")

// How an RGNN model's weights and biases are drawn (workers/rgnn/MODELS.md "Initialisation"): kGlorot,
// uniform in +-sqrt(6 / (fan_in + fan_out)) with zero biases (the R-GCN paper's code, PyG's RGCNConv and
// RGATConv); kTorchLinear, uniform in +-1 / sqrt(fan_in) for weights and biases alike (torch.nn.Linear's
// reset_parameters, which PyG's Linear, HeteroLinear and so HGTConv keep by default).
enum class WeightInit : int32_t { kGlorot, kTorchLinear };
TESSEL_CHOICE_NAMES(WeightInit, "glorot", "torch_linear")

enum class TrainMode : int32_t { kFull, kSampled };
TESSEL_CHOICE_NAMES(TrainMode, "full", "sampled")

enum class FanoutPer : int32_t { kTotal, kRelation };
TESSEL_CHOICE_NAMES(FanoutPer, "total", "relation")

// Where sampled training reads feature rows. The file takes kAuto, kMapped and kPinned; the planner
// resolves kAuto, and picks kMemory (rows sent in the assignment) when the graph has no file.
enum class FeatureStoreChoice : int32_t { kAuto, kMapped, kPinned, kMemory };
TESSEL_CHOICE_NAMES(FeatureStoreChoice, "auto", "mapped", "pinned", "memory")

// How a GPU worker in sampled training gets a batch's feature rows onto the GPU: kHost gathers them into
// host memory and copies the batch up; kZeroCopy has the GPU read them from the pinned store through its
// device pointer (PyTorch-Direct); kAuto is kZeroCopy wherever it can run (a GPU worker, a pinned store,
// gather.rows on CUDA), else kHost.
enum class FeatureGather : int32_t { kAuto, kHost, kZeroCopy };
TESSEL_CHOICE_NAMES(FeatureGather, "auto", "host", "zero_copy")

// Where a sampled worker's structure lives (workers/rgnn/sampler.h): kReplicated = the whole graph's
// in-edges on every worker; kPartitioned = each worker's own, the owners drawing their nodes' neighbours;
// kAuto = partitioned with data.format = "partitions", else replicated.
enum class SampledStructure : int32_t { kAuto, kReplicated, kPartitioned };
TESSEL_CHOICE_NAMES(SampledStructure, "auto", "replicated", "partitioned")

// How a full-graph worker holds the rows its edges read from other workers (train.halo): kResident keeps
// every halo row of every layer's input (one exchange a layer each way); kStreamed keeps none, and runs a
// layer one peer's block of rows at a time as they arrive, fetching them again for the backward pass
// (memory by owned rows and edges, about 1.5x the exchange). kStreamed needs a model whose layers sum over
// their input rows (RgnnModel::StreamsHalo: RGCN with model.reorder).
enum class HaloMode : int32_t { kResident, kStreamed };
TESSEL_CHOICE_NAMES(HaloMode, "resident", "streamed")

enum class OptimizerName : int32_t { kAdam, kSgd, kAdamw };
TESSEL_CHOICE_NAMES(OptimizerName, "adam", "sgd", "adamw")

enum class BatchOrder : int32_t { kSequential, kShuffled };
TESSEL_CHOICE_NAMES(BatchOrder, "sequential", "shuffled")

// What a block keeps from its forward for its backward. The planner resolves kAuto and kPlan, so a
// worker's blocks are each kKeep, kOffload or kRecompute (workers/llm/llm_settings.h says what each keeps).
enum class SpillPolicy : int32_t { kAuto, kKeep, kOffload, kRecompute, kPlan };
TESSEL_CHOICE_NAMES(SpillPolicy, "auto", "keep", "offload", "recompute", "plan")

// What a worker does when the loss becomes NaN or infinite, or grows train.bad_loss_factor-fold (exit 8, or a warning).
enum class BadLossAction : int32_t { kStop, kWarn };
TESSEL_CHOICE_NAMES(BadLossAction, "stop", "warn")

// What a job computes in (train.precision). llm: fp32 throughout, or bf16 activations and working weights
// with f32 accumulation, f32 master weights, gradients and AdamW moments, and f32 LayerNorm statistics and
// loss (workers/llm/llm_settings.h). rgnn: fp32, or fp64 throughout (parameters, activations, gradients,
// Adam's moments; the kernels' double instantiations): a reference-grade run, as PyG's model.double().
enum class Precision : int32_t { kFp32, kBf16, kFp64 };
TESSEL_CHOICE_NAMES(Precision, "fp32", "bf16", "fp64")

#undef TESSEL_CHOICE_NAMES

// A choice: an enum with a NamesOf overload above.
template <typename E>
concept Choice = std::is_enum_v<E> && requires(E e) {
  NamesOf(e);
};

template <Choice E>
constexpr int32_t ChoiceCount() {
  return static_cast<int32_t>(NamesOf(E{}).size());
}

template <Choice E>
constexpr std::string_view NameOf(E value) {
  const auto names = NamesOf(value);
  const auto i = static_cast<size_t>(value);
  return i < names.size() ? names[i] : std::string_view("?");
}

template <Choice E>
constexpr std::optional<E> ChoiceNamed(std::string_view name) {
  const auto names = NamesOf(E{});
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace tessel

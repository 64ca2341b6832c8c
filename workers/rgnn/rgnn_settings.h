// What a full-graph RGNN worker receives: the validated model and training settings (RgnnSettings),
// and its partition, together the "rgnn.full" assignment payload made by the graph planner
// (orchestrator/planners/graph_planner.h). The settings are plain values resolved by the coordinator:
// model.input = "auto" arrives as kOneHot or kFeatures, never as a string.
// Thread safety: values. Failure: DecodeRgnnAssignment fails the reader on malformed bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/byte_io.h"
#include "core/choices.h"
#include "core/fields.h"
#include "core/record.h"
#include "core/tensor.h"
#include "storage/partition.h"
#include "workers/assignment.h"
#include "workers/rgnn/sampler.h"

namespace tessel::workers {

// A layer's kernel path: with both on (the default) a layer applies its weights once per unique
// (relation, node) pair and after the aggregation; each can be turned off to measure what it saves
// (model.compact, model.reorder).
enum class Compaction : int32_t { kPerUniquePair = 0, kPerEdge = 1 };
enum class Reordering : int32_t { kOn = 0, kOff = 1 };
inline constexpr std::string_view kCompactionNames[] = {"per_unique_pair", "per_edge"};
inline constexpr std::string_view kReorderingNames[] = {"on", "off"};
constexpr std::span<const std::string_view> NamesOf(Compaction) { return kCompactionNames; }
constexpr std::span<const std::string_view> NamesOf(Reordering) { return kReorderingNames; }

// The model and its training, as every RGNN worker runs them; the fields are declared once, in this list
// (core/fields.h), with no defaults: the graph planner's RgnnSettingsFor fills them from the validated
// job. model is a registered RGNN model's name (model_registry.h); input is resolved: kOneHot or kFeatures,
// never kAuto. l2 is the R-GCN paper's regulariser (MODELS.md "Objective and optimiser"): l2 * sum(w^2)
// over every parameter of layer 0, added to the loss; L2Decay gives the coupled decay with that gradient.
// precision is fp32 or fp64 (RgnnDType: the dtype of every parameter, activation and gradient).
// options holds the keys the model declares for itself (core/model_keys.h: jobs::ModelOptionsOf), which its
// layers read with ModelKey::Of.
#define TESSEL_RGNN_SETTINGS_FIELDS(X) \
  X(std::string, model)                \
  X(int32_t, layers)                   \
  X(int32_t, hidden)                   \
  X(ModelInput, input)                 \
  X(int32_t, num_bases)                \
  X(int32_t, num_blocks)               \
  X(int32_t, heads)                    \
  X(HeadMerge, head_merge)             \
  X(WeightInit, weight_init)           \
  X(Compaction, compaction)            \
  X(Reordering, reordering)            \
  X(int32_t, epochs)                   \
  X(double, lr)                        \
  X(double, beta1)                     \
  X(double, beta2)                     \
  X(double, eps)                       \
  X(double, l2)                        \
  X(Precision, precision)              \
  X(HaloMode, halo)                    \
  X(Record, options)
struct RgnnSettings {
  TESSEL_FIELDS(RgnnSettings, TESSEL_RGNN_SETTINGS_FIELDS)
};

// The coupled weight decay (Adam's g += decay * w) of the penalty l2 * sum(w^2): its gradient, 2 * l2 * w.
// torch.optim.Adam's weight_decay = lambda is the penalty lambda / 2 * sum(w^2), so a PyG or DGL script's
// weight_decay = lambda is train.l2 = lambda / 2 (jobs/README.md, "train.l2").
constexpr double L2Decay(double l2) { return 2.0 * l2; }

// The dtype an RGNN executor computes in: train.precision = "fp64" is f64, else f32.
constexpr DType RgnnDType(Precision precision) { return precision == Precision::kFp64 ? DType::kF64 : DType::kF32; }

// Where a worker's partition comes from: sent in the payload (file empty), or, with data.format =
// "partitions", read by the worker from `file`, which must be part `part` of `parts` cut from the graph
// whose GraphHash (storage/partition_manifest.h) partition.json names: graph_hash.
#define TESSEL_PART_FILE_FIELDS(X) \
  X(std::string, file)             \
  X(std::string, graph_hash)       \
  X(int32_t, part)                 \
  X(int32_t, parts)
struct PartFile {
  TESSEL_FIELDS(PartFile, TESSEL_PART_FILE_FIELDS)
};

// Reads `ref`'s part file and checks it is the part the plan was made for. kBadData naming the file.
Result<storage::WorkerPartition> ReadPartFile(const PartFile& ref);

// The payload of kind "rgnn.full": settings and one worker's partition, or the part file it reads.
class RgnnAssignment final : public AssignmentPayload {
 public:
  static constexpr std::string_view kKind = "rgnn.full";
  RgnnAssignment(RgnnSettings settings, storage::WorkerPartition partition)
      : settings(settings), partition(std::move(partition)) {}
  RgnnAssignment(RgnnSettings settings, PartFile source) : settings(settings), source(std::move(source)) {}

  std::string_view kind() const override { return kKind; }
  void Encode(ByteWriter& out) const override;
  std::string Describe() const override;
  std::string DescribeSettings() const override { return DescribeFields(settings, "settings"); }
  std::string SizedBy() const override;

  RgnnSettings settings;
  storage::WorkerPartition partition;  // empty until read when source.file is set
  PartFile source;
};

std::unique_ptr<AssignmentPayload> DecodeRgnnAssignment(ByteReader& in);

// Sampled training: fanouts per layer, input layer first (-1 = every neighbour), each per relation or in
// total (fanout_per); the final evaluation's eval_fanouts (empty = every neighbour); batch_size training
// nodes per global mini-batch; where the worker reads the feature rows it owns (store: kMemory = sent in
// the assignment, kMapped/kPinned = from the graph file at graph_path; storage/feature_store.h); how a
// GPU worker reads them (gather: kAuto is resolved by the worker, which alone knows its device).
#define TESSEL_SAMPLING_SETTINGS_FIELDS(X) \
  X(std::vector<int32_t>, fanouts)         \
  X(std::vector<int32_t>, eval_fanouts)    \
  X(FanoutPer, fanout_per)                 \
  X(int32_t, batch_size)                   \
  X(bool, prefetch)                        \
  X(FeatureStoreChoice, store)             \
  X(FeatureGather, gather)                 \
  X(std::string, graph_path)
struct SamplingSettings {
  TESSEL_FIELDS(SamplingSettings, TESSEL_SAMPLING_SETTINGS_FIELDS)
};

// The payload of kind "rgnn.sampled": settings and the structure the worker samples from (sampler.h):
// the replicated graph (with the memory store, the feature rows of the worker's nodes in id order), or,
// partitioned, the worker's own partition (sent, or read from its part file with data.partitions), whose
// owned rows carry the features.
class RgnnSampledAssignment final : public AssignmentPayload {
 public:
  static constexpr std::string_view kKind = "rgnn.sampled";
  std::string_view kind() const override { return kKind; }
  void Encode(ByteWriter& out) const override;
  std::string Describe() const override;
  std::string DescribeSettings() const override { return DescribeFields(*this); }
  std::string SizedBy() const override;

  // feature_dim 0 = one-hot input.
#define TESSEL_RGNN_SAMPLED_FIELDS(X) \
  X(RgnnSettings, settings)           \
  X(SamplingSettings, sampling)       \
  X(int32_t, worker)                  \
  X(int32_t, num_workers)             \
  X(int64_t, feature_dim)
  TESSEL_FIELD_LIST(TESSEL_RGNN_SAMPLED_FIELDS)
  // Replicated: shared, the coordinator gives every worker's assignment the same structure, encoded per
  // worker. Null with partitioned structure.
  std::shared_ptr<const SampledGraph> graph;
  std::vector<float> owned_features;  // replicated, kMemory: [owned nodes, feature_dim]
  // Partitioned: the partition, sent, or (source.file set) read by the worker from its part file.
  storage::WorkerPartition partition;
  PartFile source;
  bool partitioned() const { return graph == nullptr; }
};

std::unique_ptr<AssignmentPayload> DecodeRgnnSampledAssignment(ByteReader& in);

}  // namespace tessel::workers

// What a full-graph RGNN worker receives: the validated model and training settings (RgnnSettings),
// and its partition, together the "rgnn.full" assignment payload made by the graph planner
// (orchestrator/planners/graph_planner.h). The settings are plain values resolved by the coordinator:
// model.input = "auto" arrives as kOneHot or kFeatures, never as a string.
// Thread safety: values. Failure: DecodeRgnnAssignment fails the reader on malformed bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/byte_io.h"
#include "storage/partition.h"
#include "workers/assignment.h"
#include "workers/rgnn/sampler.h"

namespace tessel::workers {

enum class RgnnModel : int32_t { kRgcn = 0, kRgat = 1, kHgt = 2 };
enum class RgnnInput : int32_t { kOneHot = 0, kFeatures = 1 };
enum class RgnnHeadMerge : int32_t { kConcat = 0, kMean = 1 };
// A layer's kernel path: with both on (the default) a layer applies its weights once per unique
// (relation, node) pair and after the aggregation; each can be turned off to measure what it saves.
enum class Compaction : int32_t { kPerUniquePair = 0, kPerEdge = 1 };
enum class Reordering : int32_t { kOn = 0, kOff = 1 };

std::string_view RgnnModelName(RgnnModel model);

struct RgnnSettings {
  RgnnModel model = RgnnModel::kRgcn;
  int32_t layers = 2;
  int32_t hidden = 16;
  RgnnInput input = RgnnInput::kOneHot;
  int32_t num_bases = 0;
  int32_t num_blocks = 0;
  int32_t heads = 1;
  RgnnHeadMerge head_merge = RgnnHeadMerge::kConcat;
  Compaction compaction = Compaction::kPerUniquePair;
  Reordering reordering = Reordering::kOn;
  int32_t epochs = 50;
  double lr = 0.01;
  double l2 = 5e-4;  // on every parameter of layer 0
  bool operator==(const RgnnSettings&) const = default;
};

void EncodeRgnnSettings(const RgnnSettings& s, ByteWriter& out);
RgnnSettings DecodeRgnnSettings(ByteReader& in);

// The payload of kind "rgnn.full": settings and one worker's partition.
class RgnnAssignment final : public AssignmentPayload {
 public:
  static constexpr std::string_view kKind = "rgnn.full";
  RgnnAssignment(RgnnSettings settings, storage::WorkerPartition partition)
      : settings(settings), partition(std::move(partition)) {}

  std::string_view kind() const override { return kKind; }
  void Encode(ByteWriter& out) const override;
  std::string Describe() const override;

  RgnnSettings settings;
  storage::WorkerPartition partition;
};

std::unique_ptr<AssignmentPayload> DecodeRgnnAssignment(ByteReader& in);

// Where a sampled-training worker reads the feature rows it owns (storage/feature_store.h).
enum class FeatureStoreMode : int32_t {
  kMemory = 0,  // sent in the assignment (the graph has no file: imported or generated in memory)
  kMapped = 1,  // mapped from the graph file in place
  kPinned = 2,  // read from the graph file into page-locked memory
};

struct SamplingSettings {
  std::vector<int32_t> fanouts;       // per layer, input layer first; -1 = every neighbour
  std::vector<int32_t> eval_fanouts;  // the final evaluation's; empty = every neighbour
  bool per_relation = false;
  int32_t batch_size = 1024;  // training nodes per global mini-batch
  bool prefetch = true;
  FeatureStoreMode store = FeatureStoreMode::kMemory;
  std::string graph_path;  // the graph file (kMapped, kPinned)
  bool operator==(const SamplingSettings&) const = default;
};

// The payload of kind "rgnn.sampled": settings, the replicated structure (sampler.h), and, with the
// memory store, the feature rows of the worker's nodes in id order.
class RgnnSampledAssignment final : public AssignmentPayload {
 public:
  static constexpr std::string_view kKind = "rgnn.sampled";
  std::string_view kind() const override { return kKind; }
  void Encode(ByteWriter& out) const override;
  std::string Describe() const override;

  RgnnSettings settings;
  SamplingSettings sampling;
  int32_t worker = 0, num_workers = 1;
  int64_t feature_dim = 0;  // 0 = one-hot input
  // Shared: the coordinator gives every worker's assignment the same structure, encoded per worker.
  std::shared_ptr<const SampledGraph> graph;
  std::vector<float> owned_features;  // kMemory: [owned nodes, feature_dim]
};

std::unique_ptr<AssignmentPayload> DecodeRgnnSampledAssignment(ByteReader& in);

}  // namespace tessel::workers

#include "workers/rgnn/rgnn_settings.h"

#include <optional>

namespace tessel::workers {

void RgnnAssignment::Encode(ByteWriter& out) const {
  EncodeFields(settings, out);
  EncodeFields(source, out);
  if (source.file.empty()) out.PutVector(storage::EncodePartition(partition));
}

Result<storage::WorkerPartition> ReadPartFile(const PartFile& ref) {
  TESSEL_ASSIGN_OR_RETURN(storage::WorkerPartition p, storage::ReadPartitionFile(ref.file));
  if (p.graph_hash != ref.graph_hash) {
    return BadDataError(StrCat(ref.file, ": cut from the graph with hash ",
                               p.graph_hash.empty() ? "(none)" : p.graph_hash,
                               ", but the partition.json beside it names ", ref.graph_hash,
                               " (a part file of another partitioning? partition the graph again)"));
  }
  if (p.part != ref.part || p.num_parts != ref.parts) {
    return BadDataError(StrCat(ref.file, ": holds part ", p.part, " of ", p.num_parts, ", but the plan needs part ",
                               ref.part, " of ", ref.parts));
  }
  return p;
}

std::string RgnnAssignment::Describe() const {
  if (!source.file.empty()) {
    return StrCat(settings.model, " partition ", source.part, " of ", source.parts, " from ", source.file);
  }
  return StrCat(settings.model, " partition ", partition.part, " of ", partition.num_parts, ": ", partition.num_owned,
                " owned, ", partition.num_rows() - partition.num_owned, " halo rows, ", partition.src.size(), " edges");
}

namespace {

// The model settings every RGNN payload's weights and activations scale with.
std::string ModelSizedBy(const RgnnSettings& s) {
  return StrCat("model.hidden = ", s.hidden, ", model.layers = ", s.layers,
                s.num_bases > 0 ? StrCat(", model.num_bases = ", s.num_bases) : "",
                s.heads > 1 ? StrCat(", model.heads = ", s.heads) : "");
}

}  // namespace

std::string RgnnAssignment::SizedBy() const {
  // Asked before the executor is built, so a part file is not read yet: it is named instead.
  if (!source.file.empty()) {
    return StrCat(ModelSizedBy(settings), " and this worker's part file ", source.file, " (part ", source.part, " of ",
                  source.parts, "; more parts make it smaller)");
  }
  const int64_t input = settings.input == ModelInput::kOneHot ? partition.total_nodes : partition.feature_dim;
  return StrCat(ModelSizedBy(settings), " and this worker's partition (", partition.num_rows(), " rows, ",
                partition.src.size(), " edges, ", partition.num_relations(), " relations, an input width of ", input,
                settings.input == ModelInput::kOneHot ? ": model.input one-hot, a row per node of the graph" : "",
                "; more workers make it smaller)");
}

namespace {

// An encoded WorkerPartition from `in`, or none (`in` failed, naming what was wrong).
std::optional<storage::WorkerPartition> GetPartition(ByteReader& in) {
  const std::vector<uint8_t> bytes = in.GetVector<uint8_t>("partition");
  if (!in.ok()) return std::nullopt;
  Result<storage::WorkerPartition> part = storage::DecodePartition(bytes.data(), bytes.size());
  if (!part.ok()) {
    in.Fail(part.status().message());
    return std::nullopt;
  }
  return std::move(part).value();
}

}  // namespace

std::unique_ptr<AssignmentPayload> DecodeRgnnAssignment(ByteReader& in) {
  RgnnSettings settings;
  DecodeFields(settings, in, "settings");
  PartFile source;
  DecodeFields(source, in, "partition source");
  if (!in.ok()) return nullptr;
  if (!source.file.empty()) return std::make_unique<RgnnAssignment>(settings, std::move(source));
  std::optional<storage::WorkerPartition> part = GetPartition(in);
  if (!part) return nullptr;
  return std::make_unique<RgnnAssignment>(settings, std::move(*part));
}

namespace {

// How a sampled payload carries its structure.
enum class SampledStructureTag : uint8_t { kReplicated = 0, kPartition = 1, kPartFile = 2 };

}  // namespace

void RgnnSampledAssignment::Encode(ByteWriter& out) const {
  EncodeFields(*this, out);
  if (!partitioned()) {
    out.Put(SampledStructureTag::kReplicated);
    graph->Encode(out);
    out.PutVector(owned_features);
  } else if (!source.file.empty()) {
    out.Put(SampledStructureTag::kPartFile);
    EncodeFields(source, out);
  } else {
    out.Put(SampledStructureTag::kPartition);
    out.PutVector(storage::EncodePartition(partition));
  }
}

std::string RgnnSampledAssignment::Describe() const {
  if (!partitioned()) {
    int64_t owned = 0;
    for (const int32_t p : graph->part_of) owned += p == worker ? 1 : 0;
    return StrCat(settings.model, " sampled, worker ", worker, " of ", num_workers, ": ", owned, " owned nodes of ",
                  graph->num_nodes, ", ", graph->num_edges(), " edges replicated");
  }
  if (!source.file.empty()) {
    return StrCat(settings.model, " sampled, worker ", worker, " of ", num_workers, ": structure partitioned, part ",
                  source.part, " from ", source.file);
  }
  return StrCat(settings.model, " sampled, worker ", worker, " of ", num_workers, ": structure partitioned, ",
                partition.num_owned, " owned nodes of ", partition.total_nodes, ", ", partition.src.size(),
                " in-edges");
}

std::string RgnnSampledAssignment::SizedBy() const {
  std::string fanouts;
  for (const int32_t f : sampling.fanouts) fanouts += StrCat(fanouts.empty() ? "" : ", ", f);
  const std::string structure = !partitioned() ? StrCat("the graph's structure (", graph->num_nodes, " nodes, ",
                                                        graph->num_edges(), " edges, held whole by every worker)")
                                : !source.file.empty()
                                    ? StrCat("this worker's part file ", source.file, " (part ", source.part, " of ",
                                             source.parts, "; more parts make it smaller)")
                                    : StrCat("this worker's partition (", partition.num_owned, " owned nodes, ",
                                             partition.src.size(), " in-edges; more workers make it smaller)");
  return StrCat(ModelSizedBy(settings), ", train.batch_size = ", sampling.batch_size, ", train.fanouts = [", fanouts,
                "] and ", structure);
}

std::unique_ptr<AssignmentPayload> DecodeRgnnSampledAssignment(ByteReader& in) {
  auto a = std::make_unique<RgnnSampledAssignment>();
  DecodeFields(*a, in);
  const auto tag = in.Get<SampledStructureTag>("structure");
  if (!in.ok()) return nullptr;
  switch (tag) {
    case SampledStructureTag::kReplicated: {
      Result<SampledGraph> graph = SampledGraph::Decode(in);
      if (!graph.ok()) {
        in.Fail(graph.status().message());
        return nullptr;
      }
      a->graph = std::make_shared<const SampledGraph>(std::move(graph).value());
      a->owned_features = in.GetVector<float>("owned features");
      break;
    }
    case SampledStructureTag::kPartFile:
      DecodeFields(a->source, in, "partition source");
      break;
    case SampledStructureTag::kPartition: {
      std::optional<storage::WorkerPartition> part = GetPartition(in);
      if (!part) return nullptr;
      a->partition = std::move(*part);
      break;
    }
    default:
      in.Fail(StrCat("unknown sampled structure ", static_cast<int>(tag)));
      return nullptr;
  }
  if (!in.ok()) return nullptr;
  return a;
}

}  // namespace tessel::workers

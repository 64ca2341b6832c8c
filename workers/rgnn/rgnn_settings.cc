#include "workers/rgnn/rgnn_settings.h"

namespace tessel::workers {

std::string_view RgnnModelName(RgnnModel model) {
  switch (model) {
    case RgnnModel::kRgcn:
      return "rgcn";
    case RgnnModel::kRgat:
      return "rgat";
    case RgnnModel::kHgt:
      return "hgt";
  }
  return "?";
}

void EncodeRgnnSettings(const RgnnSettings& s, ByteWriter& out) {
  out.Put(static_cast<int32_t>(s.model));
  out.Put(s.layers);
  out.Put(s.hidden);
  out.Put(static_cast<int32_t>(s.input));
  out.Put(s.num_bases);
  out.Put(s.num_blocks);
  out.Put(s.heads);
  out.Put(static_cast<int32_t>(s.head_merge));
  out.Put(static_cast<int32_t>(s.compaction));
  out.Put(static_cast<int32_t>(s.reordering));
  out.Put(s.epochs);
  out.Put(s.lr);
  out.Put(s.l2);
}

namespace {

// Reads an enum stored as int32 and checks it is one of [0, count).
template <typename E>
E GetEnum(ByteReader& in, const char* what, int32_t count) {
  const int32_t v = in.Get<int32_t>(what);
  if (in.ok() && (v < 0 || v >= count)) in.Fail(StrCat(what, " = ", v, " is out of range"));
  return static_cast<E>(in.ok() ? v : 0);
}

}  // namespace

RgnnSettings DecodeRgnnSettings(ByteReader& in) {
  RgnnSettings s;
  s.model = GetEnum<RgnnModel>(in, "model", 3);
  s.layers = in.Get<int32_t>("layers");
  s.hidden = in.Get<int32_t>("hidden");
  s.input = GetEnum<RgnnInput>(in, "input", 2);
  s.num_bases = in.Get<int32_t>("num bases");
  s.num_blocks = in.Get<int32_t>("num blocks");
  s.heads = in.Get<int32_t>("heads");
  s.head_merge = GetEnum<RgnnHeadMerge>(in, "head merge", 2);
  s.compaction = GetEnum<Compaction>(in, "compaction", 2);
  s.reordering = GetEnum<Reordering>(in, "reordering", 2);
  s.epochs = in.Get<int32_t>("epochs");
  s.lr = in.Get<double>("lr");
  s.l2 = in.Get<double>("l2");
  if (in.ok() && (s.layers < 1 || s.hidden < 1 || s.heads < 1 || s.epochs < 1 || s.num_bases < 0 || s.num_blocks < 0)) {
    in.Fail("rgnn settings out of range");
  }
  return s;
}

void RgnnAssignment::Encode(ByteWriter& out) const {
  EncodeRgnnSettings(settings, out);
  out.PutVector(storage::EncodePartition(partition));
}

std::string RgnnAssignment::Describe() const {
  return StrCat(RgnnModelName(settings.model), " partition ", partition.part, " of ", partition.num_parts, ": ",
                partition.num_owned, " owned, ", partition.num_rows() - partition.num_owned, " halo rows, ",
                partition.src.size(), " edges");
}

std::unique_ptr<AssignmentPayload> DecodeRgnnAssignment(ByteReader& in) {
  RgnnSettings settings = DecodeRgnnSettings(in);
  const std::vector<uint8_t> bytes = in.GetVector<uint8_t>("partition");
  if (!in.ok()) return nullptr;
  Result<storage::WorkerPartition> part = storage::DecodePartition(bytes.data(), bytes.size());
  if (!part.ok()) {
    in.Fail(part.status().message());
    return nullptr;
  }
  return std::make_unique<RgnnAssignment>(settings, std::move(part).value());
}

void RgnnSampledAssignment::Encode(ByteWriter& out) const {
  EncodeRgnnSettings(settings, out);
  out.PutVector(sampling.fanouts);
  out.PutVector(sampling.eval_fanouts);
  out.Put<int32_t>(sampling.per_relation ? 1 : 0);
  out.Put(sampling.batch_size);
  out.Put<int32_t>(sampling.prefetch ? 1 : 0);
  out.Put(static_cast<int32_t>(sampling.store));
  out.PutString(sampling.graph_path);
  out.Put(worker);
  out.Put(num_workers);
  out.Put(feature_dim);
  graph->Encode(out);
  out.PutVector(owned_features);
}

std::string RgnnSampledAssignment::Describe() const {
  int64_t owned = 0;
  for (const int32_t p : graph->part_of) owned += p == worker ? 1 : 0;
  return StrCat(RgnnModelName(settings.model), " sampled, worker ", worker, " of ", num_workers, ": ", owned,
                " owned nodes of ", graph->num_nodes, ", ", graph->num_edges(), " edges replicated");
}

std::unique_ptr<AssignmentPayload> DecodeRgnnSampledAssignment(ByteReader& in) {
  auto a = std::make_unique<RgnnSampledAssignment>();
  a->settings = DecodeRgnnSettings(in);
  a->sampling.fanouts = in.GetVector<int32_t>("fanouts");
  a->sampling.eval_fanouts = in.GetVector<int32_t>("eval fanouts");
  a->sampling.per_relation = in.Get<int32_t>("per relation") != 0;
  a->sampling.batch_size = in.Get<int32_t>("batch size");
  a->sampling.prefetch = in.Get<int32_t>("prefetch") != 0;
  a->sampling.store = GetEnum<FeatureStoreMode>(in, "feature store", 3);
  a->sampling.graph_path = in.GetString("graph path");
  a->worker = in.Get<int32_t>("worker");
  a->num_workers = in.Get<int32_t>("workers");
  a->feature_dim = in.Get<int64_t>("feature dim");
  if (!in.ok()) return nullptr;
  Result<SampledGraph> graph = SampledGraph::Decode(in);
  if (!graph.ok()) {
    in.Fail(graph.status().message());
    return nullptr;
  }
  a->graph = std::make_shared<const SampledGraph>(std::move(graph).value());
  a->owned_features = in.GetVector<float>("owned features");
  if (!in.ok()) return nullptr;
  const auto layers = static_cast<size_t>(a->settings.layers);
  if (a->sampling.fanouts.size() != layers || (!a->sampling.eval_fanouts.empty() && a->sampling.eval_fanouts.size() != layers) ||
      a->sampling.batch_size < 1 || a->num_workers < 1 || a->worker < 0 || a->worker >= a->num_workers ||
      a->feature_dim < 0) {
    in.Fail("rgnn.sampled settings out of range");
    return nullptr;
  }
  return a;
}

}  // namespace tessel::workers

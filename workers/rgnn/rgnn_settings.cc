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

}  // namespace tessel::workers

#include "storage/chunked_generator.h"

#include <cmath>
#include <filesystem>
#include <vector>

#include "core/json.h"
#include "core/logging.h"
#include "storage/generator_rng.h"
#include "storage/npy.h"

namespace tessel::storage {
namespace {

constexpr int64_t kBlockRows = 1 << 16;  // rows streamed per write
constexpr int kMaxRejections = 64;

// A stateless draw: the stream of (seed, purpose, index).
Rng DrawFor(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t state = index ^ (stream * 0x9E3779B97F4A7C15ull);
  return Rng(seed ^ SplitMix64(&state), stream);
}

// The graph's shape from the options alone (the same on every rank).
struct Shape {
  std::vector<int64_t> counts;   // per node type
  std::vector<int64_t> offsets;  // per node type: its first global id
  std::vector<int64_t> edges;    // per relation
  std::vector<std::vector<int32_t>> perms;
  std::vector<float> means;  // [classes * feature_dim]
  explicit Shape(const GenerateOptions& o) {
    int64_t at = 0;
    for (int32_t t = 0; t < o.node_types; ++t) {
      counts.push_back(o.nodes / o.node_types + (t < o.nodes % o.node_types ? 1 : 0));
      offsets.push_back(at);
      at += counts.back();
    }
    const auto total = static_cast<int64_t>(std::llround(static_cast<double>(o.nodes) * o.avg_degree / 2.0));
    Rng perm_rng(o.seed, kPermutations);
    for (int32_t r = 0; r < o.relations; ++r) {
      edges.push_back(total / o.relations + (r < total % o.relations ? 1 : 0));
      perms.push_back(RandomPermutation(perm_rng, o.classes));
    }
    means.resize(static_cast<size_t>(o.classes) * static_cast<size_t>(o.feature_dim));
    Rng mean_rng(o.seed, kMeans);
    FillNormal(mean_rng, 1.0, means.data(), means.size());
  }
  static int32_t SrcType(const GenerateOptions& o, int32_t r) { return r % o.node_types; }
  static int32_t DstType(const GenerateOptions& o, int32_t r) { return (r + 1 + r / o.node_types) % o.node_types; }
  int32_t ClassOf(const GenerateOptions& o, int32_t t, int64_t i) const {
    return static_cast<int32_t>(
        DrawFor(o.seed, kClasses, static_cast<uint64_t>(offsets[static_cast<size_t>(t)] + i)).Below(o.classes));
  }
};

int64_t Share(int64_t n, int rank, int ranks) {
  return static_cast<int64_t>(static_cast<unsigned __int128>(n) * static_cast<uint64_t>(rank) /
                              static_cast<uint64_t>(ranks));
}

std::string EdgeFile(int32_t r, int k) { return StrCat("edges/rel", r, "-", k, ".npy"); }
std::string NodeFile(int32_t t, const char* key, int k) {
  return StrCat("node_data/type", t, "-", key, "-", k, ".npy");
}
constexpr const char* kNodeKeys[] = {"feat", "label", "train_mask", "val_mask", "test_mask"};

Status WriteNodes(const GenerateOptions& o, const Shape& shape, const std::filesystem::path& dir, int32_t t, int rank,
                  int ranks) {
  const int64_t lo = Share(shape.counts[static_cast<size_t>(t)], rank, ranks);
  const int64_t hi = Share(shape.counts[static_cast<size_t>(t)], rank + 1, ranks);
  const int64_t dim = o.feature_dim;
  std::vector<NpyWriter> w;
  for (const char* key : kNodeKeys) {
    if (dim == 0 && std::string(key) == "feat") continue;
    const std::string descr = std::string(key) == "feat" ? "<f4" : std::string(key) == "label" ? "<i8" : "|b1";
    TESSEL_ASSIGN_OR_RETURN(NpyWriter writer, NpyWriter::Create((dir / NodeFile(t, key, rank)).string(), descr, hi - lo,
                                                                std::string(key) == "feat" ? dim : 1));
    w.push_back(std::move(writer));
  }
  const double noise = o.feature_noise * std::sqrt(static_cast<double>(dim) / 2.0);
  std::vector<float> feat;
  std::vector<int64_t> label;
  std::vector<uint8_t> masks[3];
  for (int64_t b = lo; b < hi; b += kBlockRows) {
    const int64_t e = std::min(hi, b + kBlockRows);
    feat.assign(static_cast<size_t>((e - b) * dim), 0.0f);
    label.clear();
    for (auto& m : masks) m.assign(static_cast<size_t>(e - b), 0);
    for (int64_t i = b; i < e; ++i) {
      const auto g = static_cast<uint64_t>(shape.offsets[static_cast<size_t>(t)] + i);
      const int32_t c = shape.ClassOf(o, t, i);
      label.push_back(c);
      if (dim > 0) {
        float* row = feat.data() + (i - b) * dim;
        Rng rng = DrawFor(o.seed, kFeatures, g);
        FillNormal(rng, noise, row, static_cast<size_t>(dim));
        for (int64_t k = 0; k < dim; ++k) row[k] += shape.means[static_cast<size_t>(c * dim + k)];
      }
      const double u = DrawFor(o.seed, kSplits, g).Uniform();
      const size_t at = static_cast<size_t>(i - b);
      if (u < o.train_fraction) {
        masks[0][at] = 1;
      } else if (u < o.train_fraction + o.val_fraction) {
        masks[1][at] = 1;
      } else if (u < o.train_fraction + o.val_fraction + o.test_fraction) {
        masks[2][at] = 1;
      }
    }
    size_t next = 0;
    if (dim > 0) TESSEL_RETURN_IF_ERROR(w[next++].Append(feat.data(), e - b));
    TESSEL_RETURN_IF_ERROR(w[next++].Append(label.data(), e - b));
    for (const auto& m : masks) TESSEL_RETURN_IF_ERROR(w[next++].Append(m.data(), e - b));
  }
  for (NpyWriter& writer : w) TESSEL_RETURN_IF_ERROR(writer.Close());
  return Status::Ok();
}

Status WriteEdges(const GenerateOptions& o, const Shape& shape, const std::filesystem::path& dir, int32_t r, int rank,
                  int ranks) {
  const int64_t m = shape.edges[static_cast<size_t>(r)];
  const int64_t lo = Share(m, rank, ranks), hi = Share(m, rank + 1, ranks);
  const int32_t st = Shape::SrcType(o, r), dt = Shape::DstType(o, r);
  const int64_t ns = shape.counts[static_cast<size_t>(st)], nd = shape.counts[static_cast<size_t>(dt)];
  const std::vector<int32_t>& perm = shape.perms[static_cast<size_t>(r)];
  TESSEL_ASSIGN_OR_RETURN(NpyWriter w, NpyWriter::Create((dir / EdgeFile(r, rank)).string(), "<i8", hi - lo, 2));
  std::vector<int64_t> pairs;
  for (int64_t b = lo; b < hi; b += kBlockRows) {
    const int64_t e_hi = std::min(hi, b + kBlockRows);
    pairs.clear();
    for (int64_t e = b; e < e_hi; ++e) {
      Rng rng = DrawFor(o.seed, kEdges + static_cast<uint64_t>(r), static_cast<uint64_t>(e));
      const int64_t u = rng.Below(ns);
      int64_t v = rng.Below(nd);
      if (rng.Uniform() < o.planted_fraction) {
        const int32_t want = perm[static_cast<size_t>(shape.ClassOf(o, st, u))];
        for (int k = 1; k < kMaxRejections && shape.ClassOf(o, dt, v) != want; ++k) v = rng.Below(nd);
      }
      pairs.push_back(u);
      pairs.push_back(v);
    }
    TESSEL_RETURN_IF_ERROR(w.Append(pairs.data(), e_hi - b));
  }
  return w.Close();
}

}  // namespace

std::string ChunkedGraphMetadata(const GenerateOptions& o, int ranks) {
  const Shape shape(o);
  Json meta = Json::object();
  meta["graph_name"] = o.name;
  Json ntypes = Json::array(), per_chunk = Json::array(), node_data = Json::object();
  for (int32_t t = 0; t < o.node_types; ++t) {
    const std::string name = StrCat("type", t);
    ntypes.push_back(name);
    Json chunks = Json::array();
    for (int k = 0; k < ranks; ++k) {
      chunks.push_back(Share(shape.counts[static_cast<size_t>(t)], k + 1, ranks) -
                       Share(shape.counts[static_cast<size_t>(t)], k, ranks));
    }
    per_chunk.push_back(chunks);
    for (const char* key : kNodeKeys) {
      if (o.feature_dim == 0 && std::string(key) == "feat") continue;
      Json files = Json::array();
      for (int k = 0; k < ranks; ++k) files.push_back(NodeFile(t, key, k));
      node_data[name][key] = {{"format", {{"name", "numpy"}}}, {"data", files}};
    }
  }
  meta["node_type"] = ntypes;
  meta["num_nodes_per_chunk"] = per_chunk;
  Json etypes = Json::array(), edge_chunks = Json::array(), edges = Json::object();
  for (int32_t r = 0; r < o.relations; ++r) {
    const std::string canonical = StrCat("type", Shape::SrcType(o, r), ":rel", r, ":type", Shape::DstType(o, r));
    etypes.push_back(canonical);
    Json chunks = Json::array(), files = Json::array();
    for (int k = 0; k < ranks; ++k) {
      chunks.push_back(Share(shape.edges[static_cast<size_t>(r)], k + 1, ranks) -
                       Share(shape.edges[static_cast<size_t>(r)], k, ranks));
      files.push_back(EdgeFile(r, k));
    }
    edge_chunks.push_back(chunks);
    edges[canonical] = {{"format", {{"name", "numpy"}}}, {"data", files}};
  }
  meta["edge_type"] = etypes;
  meta["num_edges_per_chunk"] = edge_chunks;
  meta["edges"] = edges;
  meta["node_data"] = node_data;
  meta["edge_data"] = Json::object();
  return FormatJson(meta, JsonLayout::kIndented);
}

Status WriteChunkedShare(const GenerateOptions& o, const std::string& dir, int rank, int ranks) {
  TESSEL_RETURN_IF_ERROR(ValidateGenerateOptions(o));
  const std::filesystem::path root(dir);
  std::error_code ec;
  for (const char* sub : {"edges", "node_data"}) {
    std::filesystem::create_directories(root / sub, ec);
    if (ec) return StorageError(StrCat("cannot create ", (root / sub).string(), ": ", ec.message()));
  }
  const Shape shape(o);
  for (int32_t t = 0; t < o.node_types; ++t) TESSEL_RETURN_IF_ERROR(WriteNodes(o, shape, root, t, rank, ranks));
  for (int32_t r = 0; r < o.relations; ++r) TESSEL_RETURN_IF_ERROR(WriteEdges(o, shape, root, r, rank, ranks));
  return Status::Ok();
}

}  // namespace tessel::storage

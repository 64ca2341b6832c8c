#include "workers/plugin_host/conformance_case.h"

#include <tessel/ops/llm.h>
#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>
#include <tessel/ops/rgnn.h>

#include <optional>
#include <random>

#include "workers/plugin_host/op_table.h"
#include "workers/plugin_host/random_graph.h"

namespace tessel::workers::conformance {
namespace {

// ---------------------------------------------------------------------------------------------------
// Recipes: what the schema cannot say about an op's inputs.

enum class IntFill {
  kRange,         // uniform in [0, sym)
  kRangeOrNone,   // uniform in [-1, sym)
  kPtr,           // CSR offsets: nondecreasing from 0 to sizes[sym]
  kCappedPtr,     // the same, each run at most sizes[other]
  kSorted,        // nondecreasing, in [0, sym)
  kPerm,          // a permutation of [0, numel)
  kMask,          // 0 or 1
  kUniqueInRuns,  // within each run of the pointer input `other`, distinct increasing values in [0, sym)
  kDistinct,      // distinct values in [0, sym)
  kLayout,        // the tensor of that name of the case's random graph (graph recipes)
};

struct IntRule {
  std::string_view arg;
  IntFill fill;
  std::string_view sym;
  std::string_view other = {};
};

using FixFn = void (*)(Sizes&, int variant);
using ParamsFn = std::vector<uint8_t> (*)(const Sizes&);

struct Recipe {
  std::vector<IntRule> ints;
  FixFn fix = nullptr;        // sizes that depend on others (gemm's transposes, attention's heads)
  ParamsFn params = nullptr;  // the op's parameter struct
  bool in_place = false;      // the op updates its inputs (optim.*): they are compared, not held fixed
  bool graph = false;         // the fused RGNN ops: a random graph in the segment layout (random_graph.h)
};

template <typename P>
std::vector<uint8_t> Bytes(const P& p) {
  std::vector<uint8_t> out(sizeof(P));
  std::memcpy(out.data(), &p, sizeof(P));
  return out;
}

void FixGemm(Sizes& s, int variant) {
  const int64_t m = s["M"], n = s["N"], k = s["Q"];
  const bool ta = (variant & 1) != 0, tb = (variant & 2) != 0;
  s["_ta"] = ta;
  s["_tb"] = tb;
  s["P"] = ta ? k : m;
  s["Q"] = ta ? m : k;
  s["S"] = tb ? n : k;
  s["U"] = tb ? k : n;
}
std::vector<uint8_t> GemmParams(const Sizes& s) {
  return Bytes(tessel_gemm_params{sizeof(tessel_gemm_params), static_cast<int32_t>(s.at("_ta")),
                                  static_cast<int32_t>(s.at("_tb")), 1.25, 0.5});
}
std::vector<uint8_t> XentParams(const Sizes&) {
  return Bytes(tessel_softmax_xent_params{sizeof(tessel_softmax_xent_params), 0.5});
}
std::vector<uint8_t> AdamParams(const Sizes&) {
  return Bytes(tessel_adam_params{sizeof(tessel_adam_params), 1e-2, 0.9, 0.999, 1e-8, 0.01, 3});
}
std::vector<uint8_t> AdamWParams(const Sizes&) {
  return Bytes(tessel_adamw_params{sizeof(tessel_adamw_params), 1e-2, 0.9, 0.999, 1e-8, 0.1, 0.75, 3});
}
std::vector<uint8_t> LayerNormParams(const Sizes&) {
  return Bytes(tessel_layernorm_params{sizeof(tessel_layernorm_params), 1e-5});
}
void FixEncoder(Sizes& s, int) { s["P"] = std::max(s["P"], s["S"]); }
void FixAttention(Sizes& s, int variant) {
  static constexpr int64_t kHeads[] = {1, 3, 2, 4};
  const int64_t heads = kHeads[variant % 4];
  s["H"] = heads;
  s["C"] = heads * s["C"];  // the symbol's own size becomes the head width
  s["Q"] = 3 * s["C"];
}
std::vector<uint8_t> AttentionParams(const Sizes& s) {
  return Bytes(tessel_attention_params{sizeof(tessel_attention_params), static_cast<int32_t>(s.at("H"))});
}
void FixCompact(Sizes& s, int) { s["U"] = std::min(s["U"], s["R"] * s["M"]); }
// The fused RGNN ops: N output rows among the M input rows (a destination row is also an input row), and
// distinct one-hot ids (V >= M).
void FixGraph(Sizes& s, int) {
  s["N"] = std::min(s["N"], s["M"]);
  if (s.count("V") != 0) s["V"] = std::max(s["V"], s["M"]);
}
constexpr int64_t kGraphHeads[] = {1, 3, 2, 2};
void FixRgat(Sizes& s, int variant) {
  FixGraph(s, variant);
  s["H"] = kGraphHeads[variant % 4];
  s["F"] = s["H"] * s["Dh"];
  s["_merge"] = variant % 2;  // 1: the heads averaged
  s["_reorder"] = variant >= 2;
  s["O"] = s["_merge"] != 0 ? s["Dh"] : s["F"];
}
std::vector<uint8_t> RgatParams(const Sizes& s) {
  return Bytes(tessel_rgat_params{sizeof(tessel_rgat_params), static_cast<int32_t>(s.at("H")),
                                  static_cast<int32_t>(s.at("_merge")), static_cast<int32_t>(s.at("_reorder")), 0.2f});
}
void FixHgt(Sizes& s, int variant) {
  FixGraph(s, variant);
  s["H"] = kGraphHeads[variant % 4];
  s["F"] = s["H"] * s["Dh"];
  s["_reorder"] = variant % 2;
}
std::vector<uint8_t> HgtParams(const Sizes& s) {
  return Bytes(tessel_hgt_params{sizeof(tessel_hgt_params), static_cast<int32_t>(s.at("H")),
                                 static_cast<int32_t>(s.at("_reorder"))});
}

// The layout tensors of <tessel/ops/rgnn.h> (TESSEL_RGNN_DST_LAYOUT, dedge_pair, TESSEL_RGNN_SRC_LAYOUT).
constexpr std::string_view kLayoutNames[] = {"dblk_row", "dblk_run",  "drun_rel",   "drun_seg",  "seg_dst",
                                             "seg_edge", "dedge_src", "dedge_pair", "sblk_row",  "sblk_run",
                                             "srun_rel", "srun_pair", "pair_src",   "pair_edge", "sedge_seg"};
Recipe GraphRecipe(FixFn fix, ParamsFn params = nullptr) {
  Recipe r;
  for (std::string_view name : kLayoutNames) r.ints.push_back({name, IntFill::kLayout, ""});
  r.ints.push_back({"row_id", IntFill::kDistinct, "V"});
  r.fix = fix;
  r.params = params;
  r.graph = true;
  return r;
}

void FixBlockDiag(Sizes& s, int) {
  s["K"] = s["B"] * s["P"];
  s["D"] = s["B"] * s["Q"];
}

const std::map<std::string_view, Recipe>& Recipes() {
  static const auto* recipes = new std::map<std::string_view, Recipe>{
      {"nn.softmax_xent.fwd_bwd",
       {{{"labels", IntFill::kRange, "C"}, {"mask", IntFill::kMask, ""}}, nullptr, &XentParams}},
      {"nn.embedding.fwd", {{{"ids", IntFill::kRange, "V"}}}},
      {"nn.embedding.bwd", {{{"ids", IntFill::kRange, "V"}}}},
      {"nn.gemm", {{}, &FixGemm, &GemmParams}},
      {"optim.adam.step", {{}, nullptr, &AdamParams, true}},
      {"optim.adam.step_rows", {{{"row_of", IntFill::kRangeOrNone, "Z"}}, nullptr, &AdamParams, true}},
      {"optim.adamw.step", {{}, nullptr, &AdamWParams, true}},
      {"llm.encoder.fwd", {{{"tokens", IntFill::kRange, "V"}}, &FixEncoder}},
      {"llm.encoder.bwd", {{{"tokens", IntFill::kRange, "V"}}, &FixEncoder}},
      {"llm.layernorm.fwd", {{}, nullptr, &LayerNormParams}},
      {"llm.layernorm.bwd", {{}, nullptr, &LayerNormParams}},
      {"llm.layernorm.bwd_from_output", {{}, nullptr, &LayerNormParams}},
      {"llm.attention.fwd", {{}, &FixAttention, &AttentionParams}},
      {"llm.attention.bwd", {{}, &FixAttention, &AttentionParams}},
      {"gather.rows", {{{"ids", IntFill::kRange, "N"}}}},
      {"rgnn.typed_linear.fwd",
       {{{"uniq_ptr", IntFill::kCappedPtr, "U", "M"}, {"uniq_src", IntFill::kUniqueInRuns, "M", "uniq_ptr"}},
        &FixCompact}},
      {"rgnn.typed_linear.bwd",
       {{{"uniq_ptr", IntFill::kCappedPtr, "U", "M"}, {"uniq_src", IntFill::kUniqueInRuns, "M", "uniq_ptr"}},
        &FixCompact}},
      {"rgnn.typed_embed.fwd",
       {{{"uniq_ptr", IntFill::kCappedPtr, "U", "M"},
         {"uniq_src", IntFill::kUniqueInRuns, "M", "uniq_ptr"},
         {"row_id", IntFill::kRange, "V"}},
        &FixCompact}},
      {"rgnn.typed_embed.bwd",
       {{{"uniq_ptr", IntFill::kCappedPtr, "U", "M"},
         {"uniq_src", IntFill::kUniqueInRuns, "M", "uniq_ptr"},
         {"row_id", IntFill::kRange, "V"}},
        &FixCompact}},
      {"rgnn.aggregate.fwd",
       {{{"edge_uniq", IntFill::kSorted, "U"}, {"dst_ptr", IntFill::kPtr, "E"}, {"dst_edges", IntFill::kPerm, ""}}}},
      {"rgnn.aggregate.bwd", {{{"dst", IntFill::kRange, "N"}, {"uniq_edge_ptr", IntFill::kPtr, "E"}}}},
      {"rgnn.typed_gate.fwd", {{{"node_type", IntFill::kRange, "G"}}}},
      {"rgnn.typed_gate.bwd", {{{"node_type", IntFill::kRange, "G"}}}},
      {"rgnn.block_diag.fwd", {{}, &FixBlockDiag}},
      {"rgnn.block_diag.bwd", {{}, &FixBlockDiag}},
      {"rgnn.rgcn.fwd", GraphRecipe(&FixGraph)},
      {"rgnn.rgcn.bwd", GraphRecipe(&FixGraph)},
      {"rgnn.rgcn_embed.fwd", GraphRecipe(&FixGraph)},
      {"rgnn.rgcn_embed.bwd", GraphRecipe(&FixGraph)},
      {"rgnn.rgcn_embed.bwd_rows", GraphRecipe(&FixGraph)},
      {"rgnn.rgat.fwd", GraphRecipe(&FixRgat, &RgatParams)},
      {"rgnn.rgat.bwd", GraphRecipe(&FixRgat, &RgatParams)},
      {"rgnn.rgat_embed.fwd", GraphRecipe(&FixRgat, &RgatParams)},
      {"rgnn.rgat_embed.bwd", GraphRecipe(&FixRgat, &RgatParams)},
      {"rgnn.hgt.fwd", GraphRecipe(&FixHgt, &HgtParams)},
      {"rgnn.hgt.bwd", GraphRecipe(&FixHgt, &HgtParams)},
  };
  return *recipes;
}

const Recipe& RecipeFor(std::string_view op) {
  static const Recipe kNone;
  auto it = Recipes().find(op);
  return it == Recipes().end() ? kNone : it->second;
}

}  // namespace

std::string ForwardOf(std::string_view op) {
  const size_t dot = op.rfind('.');
  if (dot == std::string_view::npos || op.substr(dot + 1, 3) != "bwd") return "";
  return StrCat(op.substr(0, dot), ".fwd");
}

bool UpdatesInputs(std::string_view op) { return RecipeFor(op).in_place; }

namespace {

// ---------------------------------------------------------------------------------------------------
// Generating a case from the schema and the recipe.

DType Resolve(SchemaType type, DType t) {
  switch (type) {
    case SchemaType::kFloating:
      return t;
    case SchemaType::kAccumulate:
      return t == DType::kF64 ? DType::kF64 : DType::kF32;
    case SchemaType::kF32:
      return DType::kF32;
    case SchemaType::kF64:
      return DType::kF64;
    case SchemaType::kI32:
      return DType::kI32;
    case SchemaType::kI64:
      return DType::kI64;
    case SchemaType::kU8:
      return DType::kU8;
  }
  return t;
}

std::vector<int64_t> ShapeOf(const SchemaArg& arg, const Sizes& sizes) {
  std::vector<int64_t> shape;
  for (const SchemaDim& d : arg.dims) shape.push_back(d.symbol.empty() ? d.value : sizes.at(d.symbol) + d.value);
  return shape;
}

Sizes AssignSizes(const Schema& schema, const Recipe& recipe, int variant) {
  static constexpr int64_t kSmall[] = {3, 5, 7, 9, 11, 13, 15};
  static constexpr int64_t kOdd[] = {17, 33, 23, 41, 19, 37, 29};
  std::vector<std::string> symbols;
  for (const auto* args : {&schema.inputs, &schema.outputs}) {
    for (const SchemaArg& a : *args) {
      for (const SchemaDim& d : a.dims) {
        if (!d.symbol.empty() && std::find(symbols.begin(), symbols.end(), d.symbol) == symbols.end())
          symbols.push_back(d.symbol);
      }
    }
  }
  const auto assign = [&](const auto& size_of) {
    Sizes s;
    for (size_t i = 0; i < symbols.size(); ++i) s[symbols[i]] = size_of(i);
    if (recipe.fix != nullptr) recipe.fix(s, variant);
    return s;
  };
  if (variant != kTimingVariant) {
    return assign([&](size_t i) -> int64_t { return variant == 0 ? 1 : variant == 1 ? kSmall[i % 7] : kOdd[i % 7]; });
  }
  // The timing shape: the largest tensor holds about a million elements at most.
  for (int64_t base = int64_t{1} << 20;; base /= 2) {
    Sizes s = assign([&](size_t i) -> int64_t { return std::max<int64_t>(1, base - static_cast<int64_t>(i % 3)); });
    int64_t largest = 0;
    for (const auto* args : {&schema.inputs, &schema.outputs}) {
      for (const SchemaArg& a : *args) {
        int64_t n = 1;
        for (int64_t d : ShapeOf(a, s)) n *= d;
        largest = std::max(largest, n);
      }
    }
    if (largest <= (int64_t{1} << 20) || base <= 1) return s;
  }
}

void FillFloating(Buffer& b, std::string_view name, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(-1.0, 1.0), positive(0.1, 1.0), away(0.5, 1.5);
  for (int64_t i = 0; i < b.numel(); ++i) {
    double v;
    if (name == "v" || name == "rstd" || name == "norm" || name == "seg_norm") {
      v = positive(rng);
    } else if (name == "w") {
      v = (rng() & 1) ? away(rng) : -away(rng);
    } else {
      v = unit(rng);
    }
    b.Set(i, v);
  }
}

Status FillInteger(Buffer& b, const IntRule& rule, const Sizes& sizes, const Case& c, std::mt19937_64& rng) {
  const auto size = [&](std::string_view sym) { return sizes.at(std::string(sym)); };
  const int64_t n = b.numel();
  switch (rule.fill) {
    case IntFill::kRange:
    case IntFill::kRangeOrNone: {
      std::uniform_int_distribution<int64_t> pick(rule.fill == IntFill::kRange ? 0 : -1, size(rule.sym) - 1);
      for (int64_t i = 0; i < n; ++i) b.Set(i, static_cast<double>(pick(rng)));
      return Status::Ok();
    }
    case IntFill::kMask:
      for (int64_t i = 0; i < n; ++i) b.Set(i, static_cast<double>(rng() % 4 != 0));
      return Status::Ok();
    case IntFill::kSorted: {
      std::uniform_int_distribution<int64_t> pick(0, size(rule.sym) - 1);
      std::vector<int64_t> v(static_cast<size_t>(n));
      for (int64_t& x : v) x = pick(rng);
      std::sort(v.begin(), v.end());
      for (int64_t i = 0; i < n; ++i) b.Set(i, static_cast<double>(v[static_cast<size_t>(i)]));
      return Status::Ok();
    }
    case IntFill::kPerm: {
      std::vector<int64_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
      std::shuffle(v.begin(), v.end(), rng);
      for (int64_t i = 0; i < n; ++i) b.Set(i, static_cast<double>(v[static_cast<size_t>(i)]));
      return Status::Ok();
    }
    case IntFill::kPtr:
    case IntFill::kCappedPtr: {
      const int64_t bins = n - 1, total = size(rule.sym);
      const int64_t cap = rule.fill == IntFill::kCappedPtr ? size(rule.other) : total;
      if (bins < 1 || total > bins * cap)
        return InternalError(StrCat("recipe: cannot split ", total, " over ", bins, " runs"));
      std::vector<int64_t> counts(static_cast<size_t>(bins), 0);
      std::uniform_int_distribution<int64_t> pick(0, bins - 1);
      for (int64_t placed = 0; placed < total;) {
        int64_t& slot = counts[static_cast<size_t>(pick(rng))];
        if (slot < cap) ++slot, ++placed;
      }
      int64_t at = 0;
      b.Set(0, 0);
      for (int64_t i = 0; i < bins; ++i) b.Set(i + 1, static_cast<double>(at += counts[static_cast<size_t>(i)]));
      return Status::Ok();
    }
    case IntFill::kDistinct: {
      std::vector<int64_t> all(static_cast<size_t>(size(rule.sym)));
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
      std::shuffle(all.begin(), all.end(), rng);
      if (static_cast<int64_t>(all.size()) < n)
        return InternalError(StrCat("recipe: ", n, " distinct values below ", all.size()));
      for (int64_t i = 0; i < n; ++i) b.Set(i, static_cast<double>(all[static_cast<size_t>(i)]));
      return Status::Ok();
    }
    case IntFill::kLayout: {
      auto it = c.layout.find(rule.arg);
      if (it == c.layout.end() || static_cast<int64_t>(it->second.size()) != n) {
        return InternalError(StrCat("recipe: no layout tensor ", rule.arg, " of ", n, " elements"));
      }
      for (int64_t i = 0; i < n; ++i) b.Set(i, static_cast<double>(it->second[static_cast<size_t>(i)]));
      return Status::Ok();
    }
    case IntFill::kUniqueInRuns: {
      auto it = std::find(c.input_names.begin(), c.input_names.end(), rule.other);
      if (it == c.input_names.end())
        return InternalError(StrCat("recipe: no input ", rule.other, " before ", rule.arg));
      const Buffer& ptr = c.inputs[static_cast<size_t>(it - c.input_names.begin())];
      const int64_t range = size(rule.sym);
      std::vector<int64_t> all(static_cast<size_t>(range));
      for (int64_t i = 0; i < range; ++i) all[static_cast<size_t>(i)] = i;
      for (int64_t r = 0; r + 1 < ptr.numel(); ++r) {
        const auto begin = static_cast<int64_t>(ptr.At(r)), end = static_cast<int64_t>(ptr.At(r + 1));
        std::shuffle(all.begin(), all.end(), rng);
        std::vector<int64_t> pick(all.begin(), all.begin() + (end - begin));
        std::sort(pick.begin(), pick.end());
        for (int64_t i = begin; i < end; ++i) b.Set(i, static_cast<double>(pick[static_cast<size_t>(i - begin)]));
      }
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// The random graph of a fused RGNN op's case: E edges (and some parallel ones) from M input rows into N
// output rows over R relations, compacted except in variant 2, with small blocks so that even tiny
// graphs span several. Sets the layout's sizes (E, S, U, B, Q, C, P) and its tensors; returns seg_norm.
std::vector<double> MakeGraph(Case& c, int variant, uint64_t seed) {
  Sizes& s = c.sizes;
  const int64_t m = s.at("M"), n = s.at("N");
  SegmentOptions options;
  options.dst_block_rows = std::max<int64_t>(1, (n + 2) / 3);
  options.src_block_rows = std::max<int64_t>(1, (m + 1) / 2);
  options.compact = variant != 2;
  const SegmentGraph g =
      RandomSegmentGraph(m, n, s.at("R"), s.at("E"), std::max<int64_t>(1, (2 * m) / 3), seed ^ 0x5eedull, options);
  const auto wide = [](const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); };
  c.layout = {{"dblk_row", g.dblk_row},         {"dblk_run", g.dblk_run},           {"drun_rel", wide(g.drun_rel)},
              {"drun_seg", g.drun_seg},         {"seg_dst", wide(g.seg_dst)},       {"seg_edge", g.seg_edge},
              {"dedge_src", wide(g.dedge_src)}, {"dedge_pair", wide(g.dedge_pair)}, {"sblk_row", g.sblk_row},
              {"sblk_run", g.sblk_run},         {"srun_rel", wide(g.srun_rel)},     {"srun_pair", g.srun_pair},
              {"pair_src", wide(g.pair_src)},   {"pair_edge", g.pair_edge},         {"sedge_seg", wide(g.sedge_seg)}};
  s["E"] = g.num_edges();
  s["S"] = g.num_segs();
  s["U"] = g.num_pairs();
  s["B"] = static_cast<int64_t>(g.dblk_row.size()) - 1;
  s["Q"] = static_cast<int64_t>(g.drun_rel.size());
  s["C"] = static_cast<int64_t>(g.sblk_row.size()) - 1;
  s["P"] = static_cast<int64_t>(g.srun_rel.size());
  return g.seg_norm;
}

// Why an op cannot be generated ("" when it can).
std::string Uncovered(const Schema& schema, const Recipe& recipe) {
  const tessel_op_decl* decl = FindOp(schema.op);
  if (decl != nullptr && decl->params_size > 0 && recipe.params == nullptr) return "no recipe for its parameters";
  for (const SchemaArg& a : schema.inputs) {
    if (a.type != SchemaType::kI32 && a.type != SchemaType::kI64 && a.type != SchemaType::kU8) continue;
    const bool known =
        std::any_of(recipe.ints.begin(), recipe.ints.end(), [&](const IntRule& r) { return r.arg == a.name; });
    if (!known) return StrCat("no recipe for its index input '", a.name, "'");
  }
  return "";
}

}  // namespace

Result<Case> Generate(const Schema& schema, DType t, int variant, uint64_t seed) {
  const Recipe& recipe = RecipeFor(schema.op);
  if (std::string why = Uncovered(schema, recipe); !why.empty()) return UsageError(why);
  std::mt19937_64 rng(seed);
  Case c;
  c.sizes = AssignSizes(schema, recipe, variant);
  std::vector<double> seg_norm;
  if (recipe.graph) seg_norm = MakeGraph(c, variant, seed);
  for (const SchemaArg& a : schema.inputs) {
    Buffer b(Resolve(a.type, t), ShapeOf(a, c.sizes));
    if (a.name == "seg_norm" && recipe.graph) {
      for (int64_t i = 0; i < b.numel(); ++i) b.Set(i, seg_norm[static_cast<size_t>(i)]);
    } else if (IsFloating(b.dtype())) {
      FillFloating(b, a.name, rng);
    } else {
      auto rule =
          std::find_if(recipe.ints.begin(), recipe.ints.end(), [&](const IntRule& r) { return r.arg == a.name; });
      TESSEL_RETURN_IF_ERROR(FillInteger(b, *rule, c.sizes, c, rng));
    }
    c.input_names.push_back(a.name);
    c.inputs.push_back(std::move(b));
  }
  for (const SchemaArg& a : schema.outputs) {
    Buffer b(Resolve(a.type, t), ShapeOf(a, c.sizes));
    FillFloating(b, "", rng);  // some outputs are added to (gradients) or read (gemm's beta)
    c.output_names.push_back(a.name);
    c.outputs.push_back(std::move(b));
  }
  if (recipe.params != nullptr) c.params = recipe.params(c.sizes);
  return c;
}

Result<Case> BindBackward(const Schema& bwd, const Case& f, DType t, uint64_t seed) {
  Case b;
  b.sizes = f.sizes;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  const auto find = [](const std::vector<std::string>& names, std::string_view name) -> int {
    auto it = std::find(names.begin(), names.end(), name);
    return it == names.end() ? -1 : static_cast<int>(it - names.begin());
  };
  for (const SchemaArg& a : bwd.inputs) {
    for (const SchemaDim& d : a.dims) {
      if (!d.symbol.empty() && b.sizes.count(d.symbol) == 0)
        return UsageError(StrCat("size ", d.symbol, " is not the forward's"));
    }
    const std::vector<int64_t> shape = ShapeOf(a, b.sizes);
    const DType dtype = Resolve(a.type, t);
    std::optional<Buffer> value;
    if (int i = find(f.input_names, a.name); i >= 0) {
      value = f.inputs[static_cast<size_t>(i)];
    } else if (int o = find(f.output_names, a.name); o >= 0) {
      value = f.outputs[static_cast<size_t>(o)];
    } else if (auto l = f.layout.find(a.name); l != f.layout.end()) {
      value.emplace(dtype, shape);
      if (value->numel() != static_cast<int64_t>(l->second.size()))
        return UsageError(StrCat("layout ", a.name, " differs"));
      for (int64_t k = 0; k < value->numel(); ++k)
        value->Set(k, static_cast<double>(l->second[static_cast<size_t>(k)]));
    } else if (a.name.size() > 1 && a.name[0] == 'd' && find(f.output_names, a.name.substr(1)) >= 0) {
      value.emplace(dtype, shape);
      FillFloating(*value, "", rng);
    } else {
      return UsageError(StrCat("input '", a.name, "' is not the forward's"));
    }
    if (value->dtype() != dtype || value->shape() != shape)
      return UsageError(StrCat("input '", a.name, "' differs from the forward's"));
    b.input_names.push_back(a.name);
    b.inputs.push_back(std::move(*value));
  }
  for (const SchemaArg& a : bwd.outputs) {
    for (const SchemaDim& d : a.dims) {
      if (!d.symbol.empty() && b.sizes.count(d.symbol) == 0)
        return UsageError(StrCat("size ", d.symbol, " is not the forward's"));
    }
    Buffer out(Resolve(a.type, t), ShapeOf(a, b.sizes));
    FillFloating(out, "", rng);
    b.output_names.push_back(a.name);
    b.outputs.push_back(std::move(out));
  }
  const tessel_op_decl* decl = FindOp(bwd.op);
  if (decl != nullptr && decl->params_size > 0) {
    if (decl->params_size == f.params.size()) {
      b.params = f.params;
    } else if (const Recipe& r = RecipeFor(bwd.op); r.params != nullptr) {
      b.params = r.params(b.sizes);
    } else {
      return UsageError("no recipe for its parameters");
    }
  }
  return b;
}

}  // namespace tessel::workers::conformance

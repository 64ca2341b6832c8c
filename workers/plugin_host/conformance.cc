#include "workers/plugin_host/conformance.h"

#include <tessel/bf16.h>
#include <tessel/ops/llm.h>
#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>
#include <tessel/ops/rgnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include "core/allocator.h"
#include "core/thread_pool.h"
#include "workers/plugin_host/op_table.h"
#include "workers/plugin_host/random_graph.h"
#include "workers/plugin_host/schema.h"

namespace tessel::workers {
namespace {

using Sizes = std::map<std::string, int64_t>;

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
std::vector<uint8_t> XentParams(const Sizes&) { return Bytes(tessel_softmax_xent_params{sizeof(tessel_softmax_xent_params), 0.5}); }
std::vector<uint8_t> AdamParams(const Sizes&) {
  return Bytes(tessel_adam_params{sizeof(tessel_adam_params), 1e-2, 0.9, 0.999, 1e-8, 0.01, 3});
}
std::vector<uint8_t> AdamWParams(const Sizes&) {
  return Bytes(tessel_adamw_params{sizeof(tessel_adamw_params), 1e-2, 0.9, 0.999, 1e-8, 0.1, 0.75, 3});
}
std::vector<uint8_t> LayerNormParams(const Sizes&) { return Bytes(tessel_layernorm_params{sizeof(tessel_layernorm_params), 1e-5}); }
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
  s["_merge"] = variant % 2;    // 1: the heads averaged
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
constexpr std::string_view kLayoutNames[] = {"dblk_row", "dblk_run", "drun_rel", "drun_seg",  "seg_dst",
                                             "seg_edge", "dedge_src", "dedge_pair", "sblk_row", "sblk_run",
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

// "llm.layernorm.bwd_from_output" -> "llm.layernorm.fwd"; empty when `op` is no backward op.
std::string ForwardOf(std::string_view op) {
  const size_t dot = op.rfind('.');
  if (dot == std::string_view::npos || op.substr(dot + 1, 3) != "bwd") return "";
  return StrCat(op.substr(0, dot), ".fwd");
}

// ---------------------------------------------------------------------------------------------------
// Buffers between guard bytes.

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xA5;

class Buffer {
 public:
  Buffer(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
    numel_ = 1;
    for (int64_t d : shape_) numel_ *= d;
    nbytes_ = static_cast<size_t>(numel_) * DTypeSize(dtype_);
    Allocate();
    std::memset(base_, kGuardByte, total());
  }
  Buffer(const Buffer& other) : dtype_(other.dtype_), shape_(other.shape_), numel_(other.numel_), nbytes_(other.nbytes_) {
    Allocate();
    std::memcpy(base_, other.base_, total());
  }
  Buffer& operator=(const Buffer& other) {
    if (this != &other) {
      Buffer copy(other);
      std::swap(dtype_, copy.dtype_);
      std::swap(shape_, copy.shape_);
      std::swap(numel_, copy.numel_);
      std::swap(nbytes_, copy.nbytes_);
      std::swap(raw_, copy.raw_);
      std::swap(base_, copy.base_);
    }
    return *this;
  }
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&&) noexcept = default;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return nbytes_; }
  size_t total() const { return nbytes_ + 2 * kGuard; }
  uint8_t* base() const { return base_; }  // the guard before the data
  void* data() const { return base_ + kGuard; }
  Tensor View() const { return Tensor::Borrow(data(), dtype_, shape_); }

  // Which guard changed: "" when both hold.
  std::string_view BrokenGuard() const {
    const auto changed = [](const uint8_t* p) { return std::any_of(p, p + kGuard, [](uint8_t b) { return b != kGuardByte; }); };
    if (changed(base_)) return "before";
    if (changed(base_ + kGuard + nbytes_)) return "after";
    return "";
  }
  bool SameBytes(const Buffer& other) const { return nbytes_ == other.nbytes_ && std::memcmp(data(), other.data(), nbytes_) == 0; }

  double At(int64_t i) const {
    switch (dtype_) {
      case DType::kF32: return static_cast<const float*>(data())[i];
      case DType::kF64: return static_cast<const double*>(data())[i];
      case DType::kBF16: return ToFloat(static_cast<const Bf16*>(data())[i]);
      case DType::kI32: return static_cast<const int32_t*>(data())[i];
      case DType::kI64: return static_cast<double>(static_cast<const int64_t*>(data())[i]);
      case DType::kU8: return static_cast<const uint8_t*>(data())[i];
      case DType::kF16: return std::nan("");
    }
    return std::nan("");
  }
  void Set(int64_t i, double v) {
    switch (dtype_) {
      case DType::kF32: static_cast<float*>(data())[i] = static_cast<float>(v); break;
      case DType::kF64: static_cast<double*>(data())[i] = v; break;
      case DType::kBF16: static_cast<Bf16*>(data())[i] = ToBf16(static_cast<float>(v)); break;
      case DType::kI32: static_cast<int32_t*>(data())[i] = static_cast<int32_t>(v); break;
      case DType::kI64: static_cast<int64_t*>(data())[i] = static_cast<int64_t>(v); break;
      case DType::kU8: static_cast<uint8_t*>(data())[i] = static_cast<uint8_t>(v); break;
      case DType::kF16: break;
    }
  }
  void Zero() { std::memset(data(), 0, nbytes_); }

 private:
  void Allocate() {
    raw_.assign(total() + 64, 0);
    const auto address = reinterpret_cast<uintptr_t>(raw_.data());
    base_ = raw_.data() + ((64 - address % 64) % 64);  // 64-byte aligned, as the host's tensors
  }

  DType dtype_;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  size_t nbytes_ = 0;
  std::vector<uint8_t> raw_;
  uint8_t* base_ = nullptr;
};

bool IsFloating(DType t) { return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16; }

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += StrCat(i == 0 ? "" : ",", shape[i]);
  return s + "]";
}

// One call's tensors.
struct Case {
  Sizes sizes;
  std::vector<std::string> input_names, output_names;
  std::vector<Buffer> inputs, outputs;
  std::vector<uint8_t> params;
  std::map<std::string, std::vector<int64_t>, std::less<>> layout;  // graph recipes: the layout by name

  std::string Describe() const {
    std::string s;
    for (const auto& [sym, n] : sizes) {
      if (sym[0] != '_') s += StrCat(s.empty() ? "" : ",", sym, "=", n);
    }
    return s;
  }
};

// ---------------------------------------------------------------------------------------------------
// Generating a case from the schema and the recipe.

DType Resolve(SchemaType type, DType t) {
  switch (type) {
    case SchemaType::kFloating: return t;
    case SchemaType::kAccumulate: return t == DType::kF64 ? DType::kF64 : DType::kF32;
    case SchemaType::kF32: return DType::kF32;
    case SchemaType::kF64: return DType::kF64;
    case SchemaType::kI32: return DType::kI32;
    case SchemaType::kI64: return DType::kI64;
    case SchemaType::kU8: return DType::kU8;
  }
  return t;
}

std::vector<int64_t> ShapeOf(const SchemaArg& arg, const Sizes& sizes) {
  std::vector<int64_t> shape;
  for (const SchemaDim& d : arg.dims) shape.push_back(d.symbol.empty() ? d.value : sizes.at(d.symbol) + d.value);
  return shape;
}

// Sizes 1; small odd; no multiple of a vector width; and (variant 3) a timing shape.
constexpr int kTimingVariant = 3;
Sizes AssignSizes(const Schema& schema, const Recipe& recipe, int variant) {
  static constexpr int64_t kSmall[] = {3, 5, 7, 9, 11, 13, 15};
  static constexpr int64_t kOdd[] = {17, 33, 23, 41, 19, 37, 29};
  std::vector<std::string> symbols;
  for (const auto* args : {&schema.inputs, &schema.outputs}) {
    for (const SchemaArg& a : *args) {
      for (const SchemaDim& d : a.dims) {
        if (!d.symbol.empty() && std::find(symbols.begin(), symbols.end(), d.symbol) == symbols.end()) symbols.push_back(d.symbol);
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
      if (bins < 1 || total > bins * cap) return InternalError(StrCat("recipe: cannot split ", total, " over ", bins, " runs"));
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
      if (static_cast<int64_t>(all.size()) < n) return InternalError(StrCat("recipe: ", n, " distinct values below ", all.size()));
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
      if (it == c.input_names.end()) return InternalError(StrCat("recipe: no input ", rule.other, " before ", rule.arg));
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
  c.layout = {{"dblk_row", g.dblk_row},         {"dblk_run", g.dblk_run},       {"drun_rel", wide(g.drun_rel)},
              {"drun_seg", g.drun_seg},         {"seg_dst", wide(g.seg_dst)},   {"seg_edge", g.seg_edge},
              {"dedge_src", wide(g.dedge_src)}, {"dedge_pair", wide(g.dedge_pair)}, {"sblk_row", g.sblk_row},
              {"sblk_run", g.sblk_run},         {"srun_rel", wide(g.srun_rel)}, {"srun_pair", g.srun_pair},
              {"pair_src", wide(g.pair_src)},   {"pair_edge", g.pair_edge},     {"sedge_seg", wide(g.sedge_seg)}};
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
    const bool known = std::any_of(recipe.ints.begin(), recipe.ints.end(), [&](const IntRule& r) { return r.arg == a.name; });
    if (!known) return StrCat("no recipe for its index input '", a.name, "'");
  }
  return "";
}

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
      auto rule = std::find_if(recipe.ints.begin(), recipe.ints.end(), [&](const IntRule& r) { return r.arg == a.name; });
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

// ---------------------------------------------------------------------------------------------------
// Running a kernel.

std::vector<Tensor> Views(const std::vector<Buffer>& buffers) {
  std::vector<Tensor> out;
  for (const Buffer& b : buffers) out.push_back(b.View());
  return out;
}

Status CallOn(const Kernel& kernel, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Case& c, ThreadPool& pool) {
  std::vector<const Tensor*> ip;
  std::vector<Tensor*> op;
  for (const Tensor& t : in) ip.push_back(&t);
  for (Tensor& t : out) op.push_back(&t);
  return kernel.Call(ip, op, CallOptions{&pool, nullptr, 0, nullptr, nullptr, nullptr}, c.params.empty() ? nullptr : c.params.data(),
                     c.params.size());
}

// A case's buffers on the GPU, guards included.
class DeviceCopy {
 public:
  DeviceCopy() = default;
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() {
    for (void* p : memory_) CudaAllocator().Free(p);
  }
  Status Upload(const Case& c) {
    for (const auto* list : {&c.inputs, &c.outputs}) {
      for (const Buffer& b : *list) {
        TESSEL_ASSIGN_OR_RETURN(void* p, CudaAllocator().Allocate(b.total()));
        memory_.push_back(p);
        TESSEL_RETURN_IF_ERROR(CopyMemory(p, Device::kCuda, b.base(), Device::kCpu, b.total()));
        Tensor t = Tensor::Borrow(static_cast<uint8_t*>(p) + kGuard, b.dtype(), b.shape(), Device::kCuda);
        (list == &c.inputs ? inputs_ : outputs_).push_back(std::move(t));
      }
    }
    return Status::Ok();
  }
  Status Download(Case& c) const {
    TESSEL_RETURN_IF_ERROR(SyncStream(Device::kCuda, nullptr));
    size_t i = 0;
    for (auto* list : {&c.inputs, &c.outputs}) {
      for (Buffer& b : *list) TESSEL_RETURN_IF_ERROR(CopyMemory(b.base(), Device::kCpu, memory_[i++], Device::kCuda, b.total()));
    }
    return Status::Ok();
  }
  std::vector<Tensor> inputs_, outputs_;

 private:
  std::vector<void*> memory_;
};

// Runs `kernel` on `c` (in place: its buffers come back as the kernel left them, guards included).
Status Run(const Kernel& kernel, Case& c, ThreadPool& pool) {
  if (kernel.device() == Device::kCpu) {
    std::vector<Tensor> out = Views(c.outputs);
    return CallOn(kernel, Views(c.inputs), out, c, pool);
  }
  DeviceCopy dev;
  TESSEL_RETURN_IF_ERROR(dev.Upload(c));
  TESSEL_RETURN_IF_ERROR(CallOn(kernel, dev.inputs_, dev.outputs_, c, pool));
  return dev.Download(c);
}

// A kernel set up to be called again and again on its own copy of a case (on its device).
class Timed {
 public:
  Timed(const Kernel& kernel, const Case& c) : kernel_(kernel), scratch_(c) {}
  Status Prepare() {
    if (kernel_.device() == Device::kCuda) {
      TESSEL_RETURN_IF_ERROR(dev_.Upload(scratch_));
      in_ = dev_.inputs_;
      out_ = dev_.outputs_;
    } else {
      in_ = Views(scratch_.inputs);
      out_ = Views(scratch_.outputs);
    }
    return Call(nullptr);  // warm-up: first touches, lazy initialisation
  }
  Status Call(std::vector<double>* seconds) {
    const auto start = std::chrono::steady_clock::now();
    TESSEL_RETURN_IF_ERROR(CallOn(kernel_, in_, out_, scratch_, *pool_));
    TESSEL_RETURN_IF_ERROR(SyncStream(kernel_.device(), nullptr));
    if (seconds != nullptr) seconds->push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return Status::Ok();
  }
  ThreadPool* pool_ = nullptr;

 private:
  const Kernel& kernel_;
  Case scratch_;
  DeviceCopy dev_;
  std::vector<Tensor> in_, out_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median times of `runs` calls of `kernel` and of `other` (when not null) on `c`, their calls
// interleaved so that both see the same machine.
Result<std::pair<double, double>> TimeBoth(const Kernel& kernel, const Kernel* other, const Case& c, ThreadPool& pool,
                                           int runs) {
  Timed a(kernel, c);
  a.pool_ = &pool;
  std::optional<Timed> b;
  TESSEL_RETURN_IF_ERROR(a.Prepare());
  if (other != nullptr) {
    b.emplace(*other, c);
    b->pool_ = &pool;
    TESSEL_RETURN_IF_ERROR(b->Prepare());
  }
  std::vector<double> ta, tb;
  for (int i = 0; i < runs; ++i) {
    TESSEL_RETURN_IF_ERROR(a.Call(&ta));
    if (b) TESSEL_RETURN_IF_ERROR(b->Call(&tb));
  }
  return std::make_pair(Median(ta), b ? Median(tb) : -1.0);
}

// ---------------------------------------------------------------------------------------------------
// The case of a backward op, from its forward: the inputs the forward computes (Y, mean, rstd, lse) come
// from running the reference forward on generated inputs, as in a training step; each d<out> input is a
// random cotangent. Fails (UsageError) when a backward input is none of those.
struct Pair {
  Case forward;  // after the forward ran: its outputs hold the forward's results
  Case backward;
};

Result<Pair> FromForward(const Schema& bwd, const Kernel& fwd_kernel, DType t, int variant, uint64_t seed, ThreadPool& pool) {
  Pair p;
  TESSEL_ASSIGN_OR_RETURN(p.forward, Generate(fwd_kernel.parsed_schema(), t, variant, seed));
  TESSEL_RETURN_IF_ERROR(Run(fwd_kernel, p.forward, pool));
  const Case& f = p.forward;
  Case& b = p.backward;
  b.sizes = f.sizes;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  const auto find = [](const std::vector<std::string>& names, std::string_view name) -> int {
    auto it = std::find(names.begin(), names.end(), name);
    return it == names.end() ? -1 : static_cast<int>(it - names.begin());
  };
  for (const SchemaArg& a : bwd.inputs) {
    for (const SchemaDim& d : a.dims) {
      if (!d.symbol.empty() && b.sizes.count(d.symbol) == 0) return UsageError(StrCat("size ", d.symbol, " is not the forward's"));
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
      if (value->numel() != static_cast<int64_t>(l->second.size())) return UsageError(StrCat("layout ", a.name, " differs"));
      for (int64_t k = 0; k < value->numel(); ++k) value->Set(k, static_cast<double>(l->second[static_cast<size_t>(k)]));
    } else if (a.name.size() > 1 && a.name[0] == 'd' && find(f.output_names, a.name.substr(1)) >= 0) {
      value.emplace(dtype, shape);
      FillFloating(*value, "", rng);
    } else {
      return UsageError(StrCat("input '", a.name, "' is not the forward's"));
    }
    if (value->dtype() != dtype || value->shape() != shape) return UsageError(StrCat("input '", a.name, "' differs from the forward's"));
    b.input_names.push_back(a.name);
    b.inputs.push_back(std::move(*value));
  }
  for (const SchemaArg& a : bwd.outputs) {
    for (const SchemaDim& d : a.dims) {
      if (!d.symbol.empty() && b.sizes.count(d.symbol) == 0) return UsageError(StrCat("size ", d.symbol, " is not the forward's"));
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
  return p;
}

// ---------------------------------------------------------------------------------------------------
// Comparisons.

// Relative, with a floor of 1. A CUDA kernel sums in another order than the CPU reference (tiles,
// warps, fused multiply-adds), so its f32 results get more room.
double Tolerance(DType t, Device device) {
  switch (t) {
    case DType::kF64: return 1e-9;
    case DType::kBF16:
    case DType::kF16: return 2e-2;
    default: return device == Device::kCuda ? 5e-4 : 1e-4;
  }
}

// The first element where `got` and `want` differ beyond the dtype's tolerance: "" when none does.
// `worst` gets the largest relative difference seen.
std::string Mismatch(const Buffer& got, const Buffer& want, Device device, double* worst) {
  const bool floating = IsFloating(got.dtype());
  const double tol = Tolerance(got.dtype(), device);
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double a = got.At(i), b = want.At(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    const double diff = std::abs(a - b) / std::max(1.0, std::abs(b));
    if (floating && std::isfinite(diff)) *worst = std::max(*worst, diff);
    if (floating ? !(diff <= tol) : a != b) return StrCat("[", i, "] = ", a, ", the reference gives ", b);
  }
  return "";
}

int64_t FirstDifference(const Buffer& a, const Buffer& b) {
  const auto* x = static_cast<const uint8_t*>(a.data());
  const auto* y = static_cast<const uint8_t*>(b.data());
  const size_t size = DTypeSize(a.dtype());
  for (size_t i = 0; i < a.nbytes(); ++i) {
    if (x[i] != y[i]) return static_cast<int64_t>(i / size);
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------------
// One row of the table.

struct Row {
  std::string op;
  Device device = Device::kCpu;
  DType dtype = DType::kF32;
  std::string verdict;  // PASS, FAIL, SKIP
  std::string shapes;   // "3/3"
  std::string vs_ref;   // the worst relative difference, "itself" or "none"
  std::string grad;     // ok, n/a, -
  std::string time, ref_time;
  std::string why;      // the first failure, or the reason for a skip
};

std::string Micros(double seconds) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(seconds < 1e-4 ? 2 : 1) << seconds * 1e6;
  return s.str();
}

std::string Sci(double x) {
  std::ostringstream s;
  s << std::scientific << std::setprecision(1) << x;
  return s.str();
}

class Checker {
 public:
  Checker(const KernelRegistry& candidate, const KernelRegistry& reference, const ConformanceOptions& options)
      : candidate_(candidate), reference_(reference), options_(options), pool_(options.threads) {}

  Row Check(const Kernel& kernel, DType t) {
    Row row{kernel.op(), kernel.device(), t, "PASS", "", "", "-", "", "", ""};
    const Recipe& recipe = RecipeFor(kernel.op());
    Result<const Kernel*> ref = reference_.Find(kernel.op(), Device::kCpu);
    const Kernel* reference = ref.ok() && (*ref)->AcceptsFloating(t) ? *ref : nullptr;
    const bool itself = reference != nullptr && reference->plugin_path() == kernel.plugin_path();  // the same file, loaded twice
    double worst = 0;
    int done = 0;
    constexpr int kVariants = 3;
    std::vector<std::string> failures;
    for (int v = 0; v < kVariants && failures.empty(); ++v) {
      Result<Case> made = MakeCase(kernel, t, v);
      if (!made.ok()) return Skip(std::move(row), StrCat("not covered: ", made.status().message()));
      const Case& c = *made;
      const std::string where = StrCat(" (", c.Describe(), ")");
      const auto fail = [&](std::string why) { failures.push_back(why + where); };
      Case first = c, second = c;
      if (Status st = Run(kernel, first, pool_); !st.ok()) {
        fail(StrCat("the kernel failed: ", st.message()));
        break;
      }
      if (std::string guard = BrokenGuards(first); !guard.empty()) {
        fail(guard);
        break;
      }
      for (size_t i = 0; !recipe.in_place && i < c.inputs.size() && failures.empty(); ++i) {
        if (!first.inputs[i].SameBytes(c.inputs[i])) {
          fail(StrCat("changed its input '", c.input_names[i], "' at [", FirstDifference(first.inputs[i], c.inputs[i]), "]"));
        }
      }
      if (!failures.empty()) break;
      if (Status st = Run(kernel, second, pool_); !st.ok()) {
        fail(StrCat("the second call failed: ", st.message()));
        break;
      }
      if (std::string diff = Differs(first, second, recipe.in_place); !diff.empty()) {
        if (kernel.device() == Device::kCpu) {
          fail(StrCat("nondeterministic: ", diff, " differs between two calls with the same inputs"));
          break;
        }
        row.why = StrCat("note: ", diff, " differs between two calls (atomics?)");
      }
      if (reference != nullptr && !itself) {
        Case want = c;
        if (Status st = Run(*reference, want, pool_); !st.ok()) {
          return Skip(std::move(row), StrCat("the reference failed", where, ": ", st.message()));
        }
        for (size_t i = 0; i < c.outputs.size() && failures.empty(); ++i) {
          if (std::string m = Mismatch(first.outputs[i], want.outputs[i], kernel.device(), &worst); !m.empty()) {
            fail(StrCat("wrong value: output '", c.output_names[i], "'", m));
          }
        }
        for (size_t i = 0; recipe.in_place && i < c.inputs.size() && failures.empty(); ++i) {
          if (std::string m = Mismatch(first.inputs[i], want.inputs[i], kernel.device(), &worst); !m.empty()) {
            fail(StrCat("wrong value: updated input '", c.input_names[i], "'", m));
          }
        }
      }
      if (failures.empty()) ++done;
    }
    row.shapes = StrCat(done, "/", kVariants);
    row.vs_ref = reference == nullptr ? "none" : itself ? "itself" : Sci(worst);
    if (kernel.device() == Device::kCpu && t == DType::kF64 && !ForwardOf(kernel.op()).empty()) {
      row.grad = GradientCheck(kernel, &failures);
    }
    if (!failures.empty()) {
      row.verdict = "FAIL";
      row.why.clear();
      for (const std::string& f : failures) row.why += (row.why.empty() ? "" : "; ") + f;
      return row;
    }
    if (options_.timing_runs <= 0) return row;
    if (Result<Case> big = MakeCase(kernel, t, kTimingVariant); big.ok()) {
      Result<const Kernel*> same_device = reference_.Find(kernel.op(), kernel.device());
      const Kernel* other = same_device.ok() && (*same_device)->AcceptsFloating(t) ? *same_device : nullptr;
      if (Result<std::pair<double, double>> s = TimeBoth(kernel, other, *big, pool_, options_.timing_runs); s.ok()) {
        row.time = Micros(s->first);
        if (other != nullptr) row.ref_time = Micros(s->second);
      }
    }
    return row;
  }

 private:
  static Row Skip(Row row, std::string why) {
    row.verdict = "SKIP";
    row.why = std::move(why);
    return row;
  }

  // The forward kernel of a backward op: the reference's, so that a backward is checked against the true
  // forward and a wrong forward fails only its own row; the candidate's when the reference has none.
  const Kernel* ForwardKernel(const std::string& fwd, DType t) const {
    for (const KernelRegistry* r : {&reference_, &candidate_}) {
      Result<const Kernel*> k = r->Find(fwd, Device::kCpu);
      if (k.ok() && (*k)->AcceptsFloating(t)) return *k;
    }
    return nullptr;
  }

  Result<Case> MakeCase(const Kernel& kernel, DType t, int variant) {
    const uint64_t seed = options_.seed + static_cast<uint64_t>(variant) * 7919u + std::hash<std::string>()(kernel.op());
    const std::string fwd = ForwardOf(kernel.op());
    if (const Kernel* f = fwd.empty() ? nullptr : ForwardKernel(fwd, t); f != nullptr) {
      Result<Pair> p = FromForward(kernel.parsed_schema(), *f, t, variant, seed, pool_);
      if (p.ok()) return std::move(p->backward);
    }
    return Generate(kernel.parsed_schema(), t, variant, seed);
  }

  static std::string BrokenGuards(const Case& c) {
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      if (std::string_view g = c.outputs[i].BrokenGuard(); !g.empty()) {
        return StrCat("wrote outside its output '", c.output_names[i], "' ", ShapeText(c.outputs[i].shape()),
                      ": the guard bytes ", g, " it changed");
      }
    }
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (std::string_view g = c.inputs[i].BrokenGuard(); !g.empty()) {
        return StrCat("wrote outside its input '", c.input_names[i], "' ", ShapeText(c.inputs[i].shape()),
                      ": the guard bytes ", g, " it changed");
      }
    }
    return "";
  }

  static std::string Differs(const Case& a, const Case& b, bool in_place) {
    for (size_t i = 0; i < a.outputs.size(); ++i) {
      if (int64_t at = FirstDifference(a.outputs[i], b.outputs[i]); at >= 0) return StrCat("output '", a.output_names[i], "'[", at, "]");
    }
    for (size_t i = 0; in_place && i < a.inputs.size(); ++i) {
      if (int64_t at = FirstDifference(a.inputs[i], b.inputs[i]); at >= 0) return StrCat("input '", a.input_names[i], "'[", at, "]");
    }
    return "";
  }

  // Central differences of the forward's L = sum over outputs o of G_o . o, against the backward's
  // d<input> outputs, in f64: "ok", "n/a" (no forward, or inputs the forward does not have), or "FAIL"
  // with the failure added to `failures`.
  std::string GradientCheck(const Kernel& bwd, std::vector<std::string>* failures) {
    const std::string fwd_op = ForwardOf(bwd.op());
    const Kernel* fwd = fwd_op.empty() ? nullptr : ForwardKernel(fwd_op, DType::kF64);
    if (fwd == nullptr) return "n/a";
    const uint64_t seed = options_.seed + 104729u + std::hash<std::string>()(bwd.op());
    Result<Pair> made = FromForward(bwd.parsed_schema(), *fwd, DType::kF64, 1, seed, pool_);
    if (!made.ok()) return "n/a";
    Pair& p = *made;
    for (Buffer& out : p.backward.outputs) out.Zero();  // gradients may be added to
    Case analytic = p.backward;
    if (Status st = Run(bwd, analytic, pool_); !st.ok()) {
      failures->push_back(StrCat("the kernel failed in the gradient check: ", st.message()));
      return "FAIL";
    }
    // The cotangent of each forward output that the backward takes.
    std::vector<std::pair<size_t, const Buffer*>> cotangents;
    for (size_t i = 0; i < p.backward.input_names.size(); ++i) {
      const std::string& name = p.backward.input_names[i];
      if (name.size() < 2 || name[0] != 'd') continue;
      auto o = std::find(p.forward.output_names.begin(), p.forward.output_names.end(), name.substr(1));
      if (o != p.forward.output_names.end()) {
        cotangents.emplace_back(static_cast<size_t>(o - p.forward.output_names.begin()), &p.backward.inputs[i]);
      }
    }
    Case probe = p.forward;
    const auto objective = [&]() -> Result<double> {
      Case run = probe;
      TESSEL_RETURN_IF_ERROR(Run(*fwd, run, pool_));
      double sum = 0;
      for (const auto& [o, g] : cotangents) {
        for (int64_t k = 0; k < g->numel(); ++k) sum += g->At(k) * run.outputs[o].At(k);
      }
      return sum;
    };
    std::mt19937_64 rng(seed);
    int compared = 0;
    for (size_t j = 0; j < analytic.output_names.size(); ++j) {
      const std::string& name = analytic.output_names[j];
      if (name.size() < 2 || name[0] != 'd') continue;
      auto in = std::find(probe.input_names.begin(), probe.input_names.end(), name.substr(1));
      if (in == probe.input_names.end()) continue;
      Buffer& x = probe.inputs[static_cast<size_t>(in - probe.input_names.begin())];
      if (!IsFloating(x.dtype()) || x.numel() == 0) continue;
      // Every element of a small input, 16 random ones of a larger one.
      const int64_t samples = x.numel() <= 64 ? x.numel() : 16;
      for (int64_t s = 0; s < samples; ++s) {
        const int64_t k = x.numel() <= 64 ? s : static_cast<int64_t>(rng() % static_cast<uint64_t>(x.numel()));
        const double keep = x.At(k), h = 1e-6;
        x.Set(k, keep + h);
        Result<double> up = objective();
        x.Set(k, keep - h);
        Result<double> down = objective();
        x.Set(k, keep);
        if (!up.ok() || !down.ok()) return "n/a";
        const double numeric = (*up - *down) / (2 * h), exact = analytic.outputs[j].At(k);
        if (!(std::abs(numeric - exact) <= 1e-5 * std::max(1.0, std::abs(numeric)))) {
          failures->push_back(StrCat("wrong gradient: ", name, "[", k, "] = ", exact, ", finite differences give ", numeric,
                                     " (", p.forward.Describe(), ")"));
          return "FAIL";
        }
        ++compared;
      }
    }
    return compared > 0 ? "ok" : "n/a";
  }

  const KernelRegistry& candidate_;
  const KernelRegistry& reference_;
  ConformanceOptions options_;
  ThreadPool pool_;
};

}  // namespace

ConformanceSummary CheckConformance(const KernelRegistry& candidate, const std::string& plugin_path,
                                    const KernelRegistry& reference, std::ostream& out,
                                    const ConformanceOptions& options) {
  ConformanceSummary summary;
  std::vector<Row> rows;
  Checker checker(candidate, reference, options);
  const bool gpu = CudaAvailable();
  for (const PluginInfo& p : candidate.plugins()) {
    if (p.path != plugin_path) continue;
    for (const KernelInfo& k : p.kernels) {
      if (FindOp(k.op) == nullptr) continue;  // nothing to compare with; the load report said so
      Result<const Kernel*> kernel = candidate.Find(k.op, k.device);
      if (!kernel.ok()) continue;
      if (k.device == Device::kCuda && !gpu) {
        rows.push_back(Row{k.op, k.device, DType::kF32, "SKIP", "", "", "-", "", "", "no GPU visible: CUDA kernels are checked where one is"});
        continue;
      }
      for (DType t : {DType::kF32, DType::kF64, DType::kBF16}) {
        if ((*kernel)->AcceptsFloating(t)) rows.push_back(checker.Check(**kernel, t));
      }
    }
  }
  out << "  conformance against the built-in kernels (threads " << options.threads;
  if (options.timing_runs > 0) {
    out << ", times: median of " << options.timing_runs << " calls on the largest shape, microseconds";
  }
  out << "):\n";
  out << "  " << std::left << std::setw(31) << "op" << std::setw(6) << "dev" << std::setw(6) << "dtype" << std::setw(6)
      << "verdict" << " " << std::setw(7) << "shapes" << std::setw(9) << "vs ref" << std::setw(6) << "grad" << std::right
      << std::setw(10) << "time" << std::setw(10) << "built-in" << "\n";
  for (const Row& r : rows) {
    out << "  " << std::left << std::setw(31) << r.op << std::setw(6) << DeviceName(r.device) << std::setw(6)
        << (r.verdict == "SKIP" && r.shapes.empty() && r.why.rfind("no GPU", 0) == 0 ? "-" : std::string(DTypeName(r.dtype)))
        << std::setw(7) << r.verdict << " " << std::setw(7) << (r.shapes.empty() ? "-" : r.shapes) << std::setw(9)
        << (r.vs_ref.empty() ? "-" : r.vs_ref) << std::setw(6) << r.grad << std::right << std::setw(10)
        << (r.time.empty() ? "-" : r.time) << std::setw(10) << (r.ref_time.empty() ? "-" : r.ref_time) << "\n";
    if (!r.why.empty()) out << "      " << (r.verdict == "FAIL" ? "FAIL: " : "") << r.why << "\n";
    if (r.verdict == "PASS") ++summary.passed;
    if (r.verdict == "FAIL") ++summary.failed;
    if (r.verdict == "SKIP") ++summary.skipped;
  }
  out << "  " << summary.passed << " passed, " << summary.failed << " failed, " << summary.skipped << " skipped\n";
  return summary;
}

}  // namespace tessel::workers

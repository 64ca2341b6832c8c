#include "storage/hf_gpt2.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "core/json.h"
#include "core/logging.h"
#include "core/safe_file.h"
#include "storage/binary_file.h"
#include "storage/safetensors.h"

namespace tessel::storage {
namespace {

namespace fs = std::filesystem;

// Each llm.c tensor and its name in GPT2LMHeadModel's state_dict (after "transformer." and, per block,
// "h.{i}."); Conv1D weights are stored [in, out], llm.c's [out, in].
struct Piece {
  const char* llmc;
  const char* hf;
  bool per_block;
  bool conv1d;
};
constexpr Piece kPieces[] = {
    {"wte", "wte.weight", false, false},
    {"wpe", "wpe.weight", false, false},
    {"ln1w", "ln_1.weight", true, false},
    {"ln1b", "ln_1.bias", true, false},
    {"qkvw", "attn.c_attn.weight", true, true},
    {"qkvb", "attn.c_attn.bias", true, false},
    {"attprojw", "attn.c_proj.weight", true, true},
    {"attprojb", "attn.c_proj.bias", true, false},
    {"ln2w", "ln_2.weight", true, false},
    {"ln2b", "ln_2.bias", true, false},
    {"fcw", "mlp.c_fc.weight", true, true},
    {"fcb", "mlp.c_fc.bias", true, false},
    {"fcprojw", "mlp.c_proj.weight", true, true},
    {"fcprojb", "mlp.c_proj.bias", true, false},
    {"lnfw", "ln_f.weight", false, false},
    {"lnfb", "ln_f.bias", false, false},
};

// One Hugging Face tensor: its name, its shape there, and where its values sit in the llm.c parameters.
struct Slot {
  std::string name;
  std::vector<int64_t> shape;  // as Hugging Face stores it
  int64_t offset = 0;          // into LlmcCheckpoint::params
  bool transposed = false;     // a 2-D [in, out] stored as llm.c's [out, in]
  int64_t numel() const {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    return n;
  }
};

std::vector<Slot> SlotsOf(const LlmcConfig& c, const std::string& prefix) {
  std::vector<Slot> out;
  const std::vector<LlmcTensor> tensors = LlmcTensors(c);
  for (const Piece& p : kPieces) {
    const LlmcTensor* t = nullptr;
    for (const LlmcTensor& x : tensors) {
      if (x.name == p.llmc) t = &x;
    }
    const int blocks = p.per_block ? c.num_layers : 1;
    std::vector<int64_t> shape(t->shape.begin() + (p.per_block ? 1 : 0), t->shape.end());
    if (std::string_view(p.llmc) == "wte") shape[0] = c.vocab_size;  // the padded rows are not GPT-2's
    if (p.conv1d) std::swap(shape[0], shape[1]);
    const int64_t per = t->numel / blocks;
    for (int b = 0; b < blocks; ++b) {
      Slot s;
      s.name = p.per_block ? StrCat(prefix, "h.", b, ".", p.hf) : StrCat(prefix, p.hf);
      s.shape = shape;
      s.offset = t->offset + b * per;
      s.transposed = p.conv1d;
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += StrCat(i ? ", " : "", shape[i]);
  return s + "]";
}

// config.json's model, checked to be the GPT-2 that Tessel computes.
Result<LlmcConfig> ReadConfig(const std::string& path) {
  std::string text;
  {
    TESSEL_ASSIGN_OR_RETURN(OpenFile file, OpenForReading(path));
    text.resize(static_cast<size_t>(file.size));
    TESSEL_RETURN_IF_ERROR(ReadAt(file, text.data(), file.size, 0, path));
  }
  TESSEL_ASSIGN_OR_RETURN(const Json doc, ParseJson(text, path));
  const auto bad = [&](std::string_view key, std::string_view why) {
    return BadDataError(StrCat(path, ": ", key, ": ", why));
  };
  if (!doc.is_object()) return BadDataError(StrCat(path, ": not a JSON object"));
  const auto type = doc.find("model_type");
  if (type == doc.end() || !type->is_string() || type->get<std::string>() != "gpt2") {
    return bad("model_type", StrCat(type == doc.end() ? "missing" : type->dump(),
                                    "; Tessel reads a GPT-2 (\"gpt2\", GPT2LMHeadModel)"));
  }
  const auto size = [&](const char* key) -> Result<int32_t> {
    const auto it = doc.find(key);
    if (it == doc.end() || !it->is_number_unsigned() || it->get<int64_t>() < 1 || it->get<int64_t>() > (1 << 30)) {
      return bad(key, it == doc.end() ? "missing" : StrCat(it->dump(), " is not a positive size"));
    }
    return static_cast<int32_t>(it->get<int64_t>());
  };
  LlmcConfig c;
  TESSEL_ASSIGN_OR_RETURN(c.channels, size("n_embd"));
  TESSEL_ASSIGN_OR_RETURN(c.num_layers, size("n_layer"));
  TESSEL_ASSIGN_OR_RETURN(c.num_heads, size("n_head"));
  TESSEL_ASSIGN_OR_RETURN(c.max_seq_len, size("n_positions"));
  TESSEL_ASSIGN_OR_RETURN(c.vocab_size, size("vocab_size"));
  c.padded_vocab_size = (c.vocab_size + 127) / 128 * 128;
  // What GPT2LMHeadModel could be configured to compute that llm.c's GPT-2 does not.
  const auto is = [&](const char* key, const Json& want, const Json& absent) {
    const auto it = doc.find(key);
    return (it == doc.end() ? absent : *it) == want;
  };
  if (const auto it = doc.find("activation_function");
      it != doc.end() &&
      !(is("activation_function", "gelu_new", "") || is("activation_function", "gelu_pytorch_tanh", ""))) {
    return bad("activation_function", StrCat(it->dump(), "; Tessel's GPT-2 has GPT-2's tanh GELU (\"gelu_new\")"));
  }
  if (const auto it = doc.find("layer_norm_epsilon");
      it != doc.end() && !(it->is_number() && std::abs(it->get<double>() - 1e-5) <= 1e-12)) {
    return bad("layer_norm_epsilon", StrCat(it->dump(), "; Tessel's LayerNorm has epsilon 1e-5"));
  }
  if (const auto it = doc.find("n_inner"); it != doc.end() && !it->is_null() && *it != 4 * c.channels) {
    return bad("n_inner", StrCat(it->dump(), "; Tessel's MLP is 4 x n_embd wide (", 4 * c.channels, ")"));
  }
  for (const auto& [key, want] :
       {std::pair{"tie_word_embeddings", true}, std::pair{"scale_attn_weights", true},
        std::pair{"scale_attn_by_inverse_layer_idx", false}, std::pair{"reorder_and_upcast_attn", false},
        std::pair{"add_cross_attention", false}}) {
    if (!is(key, want, want))
      return bad(key, StrCat(doc[key].dump(), "; Tessel's GPT-2 has ", want ? "true" : "false"));
  }
  TESSEL_RETURN_IF_ERROR(ValidateLlmcConfig(c, path, Code::kBadData));
  return c;
}

}  // namespace

Result<LlmcCheckpoint> ReadHfGpt2(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / kHfConfigName).string();
  const std::string weights_path = (fs::path(dir) / kHfWeightsName).string();
  LlmcCheckpoint ck;
  TESSEL_ASSIGN_OR_RETURN(ck.config, ReadConfig(config_path));
  TESSEL_ASSIGN_OR_RETURN(const SafetensorsFile file, SafetensorsFile::Open(weights_path));
  const std::string prefix = file.Find("transformer.wte.weight") != nullptr ? "transformer."
                             : file.Find("wte.weight") != nullptr           ? ""
                                                                            : "transformer.";
  ck.params.assign(static_cast<size_t>(LlmcNumParameters(ck.config)), 0.0f);
  std::set<std::string> used;
  std::vector<float> staged;
  for (const Slot& s : SlotsOf(ck.config, prefix)) {
    const SafetensorsEntry* e = file.Find(s.name);
    if (e == nullptr) {
      return BadDataError(StrCat(weights_path, ": no tensor '", s.name, "' (", kHfConfigName, " describes a GPT-2 of ",
                                 ck.config.num_layers, " layers, width ", ck.config.channels, ")"));
    }
    if (e->shape != s.shape) {
      return BadDataError(StrCat(weights_path, ": tensor '", s.name, "' has shape ", ShapeText(e->shape), "; ",
                                 kHfConfigName, " implies ", ShapeText(s.shape)));
    }
    used.insert(s.name);
    float* to = ck.params.data() + s.offset;
    if (!s.transposed) {
      TESSEL_RETURN_IF_ERROR(file.ReadFloats(*e, to));
      continue;
    }
    staged.resize(static_cast<size_t>(s.numel()));
    TESSEL_RETURN_IF_ERROR(file.ReadFloats(*e, staged.data()));
    const int64_t in = s.shape[0], out = s.shape[1];
    for (int64_t k = 0; k < in; ++k) {
      for (int64_t o = 0; o < out; ++o) to[o * in + k] = staged[static_cast<size_t>(k * out + o)];
    }
  }
  // Besides them: the tied head (which must be wte) and the attention's mask buffers; nothing else.
  for (const SafetensorsEntry& e : file.entries()) {
    if (used.contains(e.name)) continue;
    if (e.name == "lm_head.weight") {
      const int64_t n = int64_t{ck.config.vocab_size} * ck.config.channels;
      if (e.numel() != n) return BadDataError(StrCat(weights_path, ": lm_head.weight has shape ", ShapeText(e.shape)));
      staged.resize(static_cast<size_t>(n));
      TESSEL_RETURN_IF_ERROR(file.ReadFloats(e, staged.data()));
      if (std::memcmp(staged.data(), ck.params.data(), static_cast<size_t>(n) * sizeof(float)) != 0) {
        return BadDataError(StrCat(weights_path, ": lm_head.weight differs from ", prefix,
                                   "wte.weight; Tessel's GPT-2 ties its head to the token embedding"));
      }
      continue;
    }
    if (e.name.starts_with(prefix + "h.") && (e.name.ends_with(".attn.bias") || e.name.ends_with(".attn.masked_bias")))
      continue;
    return BadDataError(StrCat(weights_path, ": tensor '", e.name, "' is not one of a GPT2LMHeadModel's"));
  }
  return ck;
}

Status WriteHfGpt2(const std::string& dir, const LlmcCheckpoint& ck) {
  const LlmcConfig& c = ck.config;
  TESSEL_RETURN_IF_ERROR(ValidateLlmcConfig(c, StrCat(dir, ": checkpoint to write"), Code::kInternal));
  if (static_cast<int64_t>(ck.params.size()) != LlmcNumParameters(c)) {
    return InternalError(StrCat(dir, ": ", ck.params.size(), " parameters; the config needs ", LlmcNumParameters(c)));
  }
  Json config = Json::object();
  config["architectures"] = {"GPT2LMHeadModel"};
  config["model_type"] = "gpt2";
  config["activation_function"] = "gelu_new";
  config["n_embd"] = c.channels;
  config["n_layer"] = c.num_layers;
  config["n_head"] = c.num_heads;
  config["n_positions"] = c.max_seq_len;
  config["n_ctx"] = c.max_seq_len;
  config["n_inner"] = nullptr;
  config["vocab_size"] = c.vocab_size;
  config["layer_norm_epsilon"] = 1e-5;
  config["initializer_range"] = 0.02;
  for (const char* dropout : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) config[dropout] = 0.0;  // as Tessel trains
  config["scale_attn_weights"] = true;
  config["tie_word_embeddings"] = true;
  config["use_cache"] = true;
  if (c.vocab_size == 50257) {  // GPT-2's <|endoftext|>
    config["bos_token_id"] = 50256;
    config["eos_token_id"] = 50256;
  }
  config["torch_dtype"] = "float32";
  TESSEL_RETURN_IF_ERROR(
      WriteFileAtomically((fs::path(dir) / kHfConfigName).string(), FormatJson(config, JsonLayout::kIndented) + "\n"));
  std::vector<Slot> slots = SlotsOf(c, "transformer.");
  std::vector<std::vector<float>> transposed;
  std::vector<SafetensorsTensor> tensors;
  for (const Slot& s : slots) {
    const float* from = ck.params.data() + s.offset;
    if (s.transposed) {
      const int64_t in = s.shape[0], out = s.shape[1];
      std::vector<float>& t = transposed.emplace_back(static_cast<size_t>(in * out));
      for (int64_t k = 0; k < in; ++k) {
        for (int64_t o = 0; o < out; ++o) t[static_cast<size_t>(k * out + o)] = from[o * in + k];
      }
      from = t.data();
    }
    tensors.push_back({s.name, s.shape, from});
  }
  return WriteSafetensors((fs::path(dir) / kHfWeightsName).string(), tensors, {{"format", "pt"}});
}

Result<LlmcCheckpoint> ReadGpt2Weights(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return ReadHfGpt2(path);
  return ReadLlmcCheckpoint(path);
}

}  // namespace tessel::storage

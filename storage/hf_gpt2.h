// GPT-2 weights in Hugging Face's layout: a directory with `config.json` and `model.safetensors` as
// `transformers` writes them for GPT2LMHeadModel (save_pretrained), read into and written from the llm.c
// checkpoint (storage/llmc.h) that the gpt2 model starts from and `tessel export` assembles.
//
// The mapping: "transformer.wte.weight" [V, C] is llm.c's wte [Vp, C] without its padded rows (V rounded
// up to a multiple of 128, the padding zero); "transformer.wpe.weight" is wpe; block i's
// "transformer.h.{i}.ln_1", "ln_2" weight and bias are ln1w/ln1b, ln2w/ln2b; its Conv1D weights are
// [in, out] where llm.c's linear weights are [out, in], so "attn.c_attn.weight" [C, 3C] is qkvw
// transposed, "attn.c_proj.weight" attprojw, "mlp.c_fc.weight" fcw, "mlp.c_proj.weight" fcprojw, their
// biases as they are; "transformer.ln_f" is lnfw/lnfb. The head is tied to wte: no "lm_head.weight" is
// written, and one that is read must equal wte. Names without the "transformer." prefix (a GPT2Model's,
// as some hub files have them) are read too, and the attention's mask buffers ("attn.bias",
// "attn.masked_bias") are skipped. F32, F16 and BF16 tensors are read (converted to float32).
//
// config.json must describe that model: model_type "gpt2"; n_embd, n_layer, n_head, n_positions and
// vocab_size; activation_function "gelu_new" (GPT-2's tanh GELU, as llm.c's); layer_norm_epsilon 1e-5;
// n_inner null or 4 x n_embd; tied embeddings, and no cross-attention or attention scaling variants.
// Failure: kBadData naming the file and the key or tensor (a missing or extra tensor, a wrong shape or
// dtype, a header that is not safetensors', a config of another model); kStorage for I/O.
// Thread safety: plain functions.
#pragma once

#include <string>

#include "core/status.h"
#include "storage/llmc.h"

namespace tessel::storage {

inline constexpr const char* kHfConfigName = "config.json";
inline constexpr const char* kHfWeightsName = "model.safetensors";

Result<LlmcCheckpoint> ReadHfGpt2(const std::string& dir);

// Writes DIR/config.json and DIR/model.safetensors (each through a temporary file); DIR must exist.
Status WriteHfGpt2(const std::string& dir, const LlmcCheckpoint& checkpoint);

// model.init_from: a Hugging Face directory (above) or an llm.c checkpoint file.
Result<LlmcCheckpoint> ReadGpt2Weights(const std::string& path);

}  // namespace tessel::storage

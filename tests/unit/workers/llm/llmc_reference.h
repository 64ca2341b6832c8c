// A naive GPT-2 in double precision, written straight from the equations of Karpathy's llm.c
// (train_gpt2.c: gpt2_forward, gpt2_backward, gpt2_update), for the GPT stage executor's reference test.
// It calls nothing of Tessel's, so it is a source of truth from outside: a gradient that Tessel drops or
// counts twice shows up as a difference here, where a Tessel-against-Tessel comparison would not see it.
//
// The model: x = wte[token] + wpe[position]; per block x += attproj(attention(qkv(ln1(x)))), then
// x += fcproj(gelu(fc(ln2(x)))); logits = lnf(x) wte^T over the first V of the Vp rows of wte (the rest
// are padding, as in llm.c); the loss is the mean softmax cross-entropy over the B x T targets.
// LayerNorm eps 1e-5, attention causal with scale 1 / sqrt(head size), GELU's tanh approximation.
// Parameters are one flat array in llm.c's order (Gpt2Tensors); a per-layer tensor is [L, ...].
//
// The update is llm.c's AdamW (gpt2_update: bias-corrected moments, decoupled weight decay
// p -= lr (m_hat / (sqrt(v_hat) + eps) + wd p)), with weight decay on the 2-D tensors only (wte, wpe,
// qkvw, attprojw, fcw, fcprojw) as train_gpt2.cu does; train_gpt2.c decays every tensor.
//
// Ownership: values. Thread safety: one thread per object. Failure: none; the caller passes sizes that
// fit (tokens in [0, V), T <= maxT, C divisible by NH), checked with assert only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::workers::reference {

struct Gpt2Shape {
  int max_t = 0, vocab = 0, padded_vocab = 0, layers = 0, heads = 0, channels = 0;
};

// One of llm.c's 16 parameter tensors: `offset` and `numel` in the flat array; a per-layer tensor's
// shape leaves out the leading L (layer l starts at offset + l x numel / L).
struct Gpt2Tensor {
  std::string name;
  std::vector<int64_t> shape;
  bool per_layer = false;
  int64_t offset = 0, numel = 0;
};
// wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb.
std::vector<Gpt2Tensor> Gpt2Tensors(const Gpt2Shape& shape);

struct AdamWSettings {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
};

class Gpt2 {
 public:
  Gpt2(const Gpt2Shape& shape, std::vector<double> params);

  // The mean loss of B sequences of T tokens (`inputs` and `targets` are [B, T]); grads() then holds
  // its gradient (set, not accumulated).
  double ForwardBackward(const std::vector<int>& inputs, const std::vector<int>& targets, int b, int t);
  // gpt2_update at 1-based step `step`, from grads().
  void Update(const AdamWSettings& h, int step);

  const Gpt2Shape& shape() const { return shape_; }
  const std::vector<Gpt2Tensor>& tensors() const { return tensors_; }
  const std::vector<double>& params() const { return params_; }
  const std::vector<double>& grads() const { return grads_; }

 private:
  const double* P(int i) const { return params_.data() + tensors_[static_cast<size_t>(i)].offset; }
  double* G(int i) { return grads_.data() + tensors_[static_cast<size_t>(i)].offset; }

  Gpt2Shape shape_;
  std::vector<Gpt2Tensor> tensors_;
  std::vector<double> params_, grads_, m_, v_;
};

}  // namespace tessel::workers::reference

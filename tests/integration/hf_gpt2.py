"""Hugging Face's side of tests/integration/hf_gpt2.sh: transformers and torch only, no Tessel code.

  hf_gpt2.py make DIR VOCAB TOKENS.bin   a tiny GPT2LMHeadModel with random weights (seeded), saved with
                                         save_pretrained into DIR, and an llm.c token file of random tokens
  hf_gpt2.py loss DIR TOKENS.bin B T     the model in DIR (from_pretrained), in float64, on llm.c's first
                                         sequential batch of TOKENS.bin (B sequences of T, targets shifted by
                                         one): prints the mean cross-entropy
  hf_gpt2.py same DIR LLMC.bin           DIR's tensors (safetensors' own reader) are those of the llm.c
                                         checkpoint, bit for bit: Conv1D weights transposed, wte unpadded
  hf_gpt2.py break DIR HOW               rewrites DIR into a bad input: HOW is llama (config.json of another
                                         model), missing (a tensor left out), shape, dtype, header (truncated)
"""
import sys

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def write_tokens(path, tokens):
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (20240520, 1, len(tokens))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())


def read_tokens(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        assert header[0] == 20240520, "not an llm.c token file"
        return np.frombuffer(f.read(), dtype=np.uint16).astype(np.int64)[: header[2]]


def make(out, vocab, tokens_path):
    torch.manual_seed(7)
    ids = {} if vocab == 50257 else {"bos_token_id": None, "eos_token_id": None}  # GPT-2's <|endoftext|>
    config = GPT2Config(vocab_size=vocab, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **ids)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():  # LayerNorms and biases away from 1 and 0, so that a swapped tensor shows
        for name, p in model.named_parameters():
            if "ln_" in name or name.endswith(".bias"):
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(out)
    write_tokens(tokens_path, np.random.default_rng(3).integers(0, vocab, 20000))


def llmc_tensors(path):
    """The llm.c checkpoint's tensors by name (train_gpt2.c's order and shapes)."""
    with open(path, "rb") as f:
        h = np.frombuffer(f.read(1024), dtype=np.int32)
        params = np.frombuffer(f.read(), dtype=np.float32)
    maxt, v, layers, c, vp = int(h[2]), int(h[3]), int(h[4]), int(h[6]), int(h[7])
    shapes = [("wte", (vp, c)), ("wpe", (maxt, c)), ("ln1w", (layers, c)), ("ln1b", (layers, c)),
              ("qkvw", (layers, 3 * c, c)), ("qkvb", (layers, 3 * c)), ("attprojw", (layers, c, c)),
              ("attprojb", (layers, c)), ("ln2w", (layers, c)), ("ln2b", (layers, c)),
              ("fcw", (layers, 4 * c, c)), ("fcb", (layers, 4 * c)), ("fcprojw", (layers, c, 4 * c)),
              ("fcprojb", (layers, c)), ("lnfw", (c,)), ("lnfb", (c,))]
    out, at = {}, 0
    for name, shape in shapes:
        n = int(np.prod(shape))
        out[name] = params[at: at + n].reshape(shape)
        at += n
    assert at == params.size, "the checkpoint's size is not its header's"
    return out, v, layers


def same(model_dir, llmc_path):
    from safetensors.numpy import load_file
    hf = load_file(f"{model_dir}/model.safetensors")
    ll, v, layers = llmc_tensors(llmc_path)
    pairs = [("transformer.wte.weight", ll["wte"][:v]), ("transformer.wpe.weight", ll["wpe"]),
             ("transformer.ln_f.weight", ll["lnfw"]), ("transformer.ln_f.bias", ll["lnfb"])]
    for i in range(layers):
        h = f"transformer.h.{i}."
        pairs += [(h + "ln_1.weight", ll["ln1w"][i]), (h + "ln_1.bias", ll["ln1b"][i]),
                  (h + "attn.c_attn.weight", ll["qkvw"][i].T), (h + "attn.c_attn.bias", ll["qkvb"][i]),
                  (h + "attn.c_proj.weight", ll["attprojw"][i].T), (h + "attn.c_proj.bias", ll["attprojb"][i]),
                  (h + "ln_2.weight", ll["ln2w"][i]), (h + "ln_2.bias", ll["ln2b"][i]),
                  (h + "mlp.c_fc.weight", ll["fcw"][i].T), (h + "mlp.c_fc.bias", ll["fcb"][i]),
                  (h + "mlp.c_proj.weight", ll["fcprojw"][i].T), (h + "mlp.c_proj.bias", ll["fcprojb"][i])]
    assert sorted(hf) == sorted(n for n, _ in pairs), sorted(set(hf) ^ set(n for n, _ in pairs))
    for name, want in pairs:
        assert hf[name].shape == want.shape and np.array_equal(hf[name], want), name
    assert not ll["wte"][v:].any(), "the padded rows of wte are not zero"
    print(f"{len(pairs)} tensors equal to the llm.c export's")


def break_model(model_dir, how):
    import json
    from safetensors.numpy import load_file, save_file
    path = f"{model_dir}/model.safetensors"
    if how == "llama":
        config = json.load(open(f"{model_dir}/config.json"))
        config["model_type"] = "llama"
        json.dump(config, open(f"{model_dir}/config.json", "w"))
        return
    if how == "header":
        with open(path, "r+b") as f:
            f.truncate(100)
        return
    tensors = load_file(path)
    if how == "missing":
        del tensors["transformer.h.1.mlp.c_fc.bias"]
    elif how == "shape":
        tensors["transformer.wpe.weight"] = tensors["transformer.wpe.weight"][:32].copy()
    elif how == "dtype":
        tensors["transformer.ln_f.bias"] = tensors["transformer.ln_f.bias"].astype(np.float64)
    save_file(tensors, path, metadata={"format": "pt"})


def loss(model_dir, tokens_path, b, t):
    model = GPT2LMHeadModel.from_pretrained(model_dir).double().eval()
    tokens = read_tokens(tokens_path)
    x = torch.tensor(tokens[: b * t].reshape(b, t))
    y = torch.tensor(tokens[1: b * t + 1].reshape(b, t))
    with torch.no_grad():
        logits = model(x).logits
    value = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    print(f"{value.item():.12g}")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "loss":
        loss(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "same":
        same(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "break":
        break_model(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"usage: {__doc__}")

#!/usr/bin/env bash
# Hugging Face GPT-2 in and out (issue 35): a tiny GPT2LMHeadModel made by transformers (random weights,
# byte vocabulary and GPT-2's 50,257), saved with save_pretrained, is Tessel's model.init_from:
# - Tessel's first-step loss on llm.c's first sequential batch equals transformers' loss (float64) on the
#   same batch within 1e-6 relative;
# - after 10 steps, `tessel export hf` writes a directory that transformers loads, whose tensors are
#   those of `tessel export llmc` bit for bit (Conv1D weights transposed, wte without its padded rows), and
#   whose loss in transformers equals Tessel's own loss from that directory (1e-6);
# - bad input: a config.json of another model, a missing tensor, a wrong shape or dtype, a truncated
#   header (each exit 3 naming the file and the key or tensor), a model of another shape than the job's
#   and a directory without model.safetensors (exit 2, naming model.init_from), an export over a non-empty
#   directory (exit 2, nothing touched).
# Needs build/bench-venv with torch and transformers (bench/peers/setup.sh --peers; scripts/test.sh makes
# it). Without them the test is skipped, unless TESSEL_REQUIRE_DATA=1 (CI), which makes it a failure.
source "$(dirname "$0")/../lib.sh"
python=$TESSEL_SOURCE_DIR/build/bench-venv/bin/python
if ! [ -x "$python" ] || ! "$python" -c "import torch, transformers, safetensors" 2>/dev/null; then
  [ "${TESSEL_REQUIRE_DATA:-0}" = 1 ] && fail "build/bench-venv has no torch + transformers (bench/peers/setup.sh --peers)"
  skip "build/bench-venv has no torch + transformers: run bench/peers/setup.sh --peers"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
w=$TESSEL_WORK
hf() { "$python" tests/integration/hf_gpt2.py "$@" 2>"$w/hf.err" || { cat "$w/hf.err" >&2; fail "hf_gpt2.py $1 failed"; }; }
# close A B: |A - B| <= 1e-6 |B| (the issue asks 1e-5; measured about 1e-10: Tessel's float32 against
# transformers in float64; a Conv1D weight left untransposed is 2e-5 off)
close() { python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-6 * abs(b))" "$1" "$2"; }
gpt() {  # gpt VOCAB TOKENS OUT STEPS [--set ...]: the tiny GPT-2's shape, llm.c's sequential batches
  local vocab=$1 tokens=$2 out=$3 steps=$4; shift 4
  "$TESSEL" run jobs/examples/gpt-demo.toml --set data.format=llmc --set "data.train_tokens=$tokens" \
    --set data.val_fraction=0 --set model.layers=2 --set model.hidden=32 --set model.heads=4 \
    --set model.context=64 --set "model.vocab_size=$vocab" --set train.batch_size=4 --set train.seq_len=32 \
    --set train.warmup_steps=0 --set train.val_every=0 --set data.order=sequential --set pipeline.microbatches=1 \
    --set resources.threads_per_worker=1 --set "train.steps=$steps" --set "job.output_dir=$out" "$@"
}

for vocab in 256 50257; do
  m=$w/m$vocab tok=$w/tok$vocab.bin
  hf make "$m" "$vocab" "$tok"
  want=$(hf loss "$m" "$tok" 4 32)
  expect_exit 0 gpt "$vocab" "$tok" "$w/run$vocab" 10 --set "model.init_from=$m"
  got=$(json "$w/run$vocab/summary.json" 's["step_loss"][0]')
  close "$got" "$want" || fail "vocab $vocab: Tessel's first-step loss $got, transformers' $want"
  echo "vocab $vocab: first-step loss from the Hugging Face model: Tessel $got, transformers $want"

  expect_exit 0 "$TESSEL" export hf "$w/run$vocab" "$w/out$vocab"
  expect_exit 0 "$TESSEL" export llmc "$w/run$vocab" "$w/out$vocab.bin"
  hf same "$w/out$vocab" "$w/out$vocab.bin" > "$w/same.txt"
  want=$(hf loss "$w/out$vocab" "$tok" 4 32)
  expect_exit 0 gpt "$vocab" "$tok" "$w/again$vocab" 1 --set "model.init_from=$w/out$vocab"
  got=$(json "$w/again$vocab/summary.json" 's["step_loss"][0]')
  close "$got" "$want" || fail "vocab $vocab: the export's loss: Tessel $got, transformers $want"
  echo "vocab $vocab: after 10 steps, exported: $(cat "$w/same.txt"); loss Tessel $got, transformers $want"
done
pass "Hugging Face GPT-2 in and out"

# Bad input.
for how in llama missing shape dtype header; do
  rm -rf "$w/bad" && cp -r "$w/m256" "$w/bad"
  hf break "$w/bad" "$how"
  expect_exit 3 gpt 256 "$w/tok256.bin" "$w/bad-run" 1 --set "model.init_from=$w/bad"
  case $how in
    llama) expect_stderr "bad/config.json: model_type: \"llama\"; Tessel reads a GPT-2" ;;
    missing) expect_stderr "bad/model.safetensors: no tensor 'transformer.h.1.mlp.c_fc.bias'" ;;
    shape) expect_stderr "tensor 'transformer.wpe.weight' has shape \[32, 32\]; config.json implies \[64, 32\]" ;;
    dtype) expect_stderr "tensor 'transformer.ln_f.bias' is F64; Tessel reads F32, F16 and BF16" ;;
    header) expect_stderr "bad/model.safetensors: the header length is .* \(truncated, or not a safetensors file\)" ;;
  esac
  echo "$how: exit 3, $(grep -m1 error "$w/stderr" | cut -c1-160)"
  [ ! -e "$w/bad-run/summary.json" ] || [ "$(json "$w/bad-run/summary.json" 's["outcome"]')" = failed ] ||
    fail "$how: the run did not fail"
done
expect_exit 2 gpt 256 "$w/tok256.bin" "$w/bad-run" 1 --set "model.init_from=$w/m256" --set model.layers=3
expect_stderr "model.init_from=.*m256: .*m256 holds a GPT-2 of 2 layers, width 32, 4 heads, context 64, vocabulary 256"
rm -rf "$w/nofile" && mkdir "$w/nofile" && cp "$w/m256/config.json" "$w/nofile/"
expect_exit 2 gpt 256 "$w/tok256.bin" "$w/bad-run" 1 --set "model.init_from=$w/nofile"
expect_stderr "model.init_from: cannot read \".*nofile/model.safetensors\": No such file"
expect_exit 2 "$TESSEL" export hf "$w/run256" "$w/m256"
expect_stderr "m256 exists and is not an empty directory"
hf loss "$w/m256" "$w/tok256.bin" 4 32 > /dev/null  # untouched: it still loads
pass "Hugging Face GPT-2: bad input refused"

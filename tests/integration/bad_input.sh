#!/usr/bin/env bash
# Bad input gives a clear error with the right exit code, names the file/line/key, and leaves nothing behind.
source "$(dirname "$0")/../lib.sh"
w=$TESSEL_WORK

# --- job files: exit 2 with FILE:LINE:COL
base='version = 1
[job]
name = "bad"
kind = "rgnn"
[data]
format = "synthetic"'
printf '%s\n[train]\nepoch = 3\n' "$base" > "$w/unknown.toml"
expect_exit 2 "$TESSEL" validate "$w/unknown.toml"
expect_stderr "unknown.toml:8:1: .*unknown key 'train.epoch'"
printf '%s\n[train]\nepochs = "many"\n' "$base" > "$w/type.toml"
expect_exit 2 "$TESSEL" run "$w/type.toml" --set job.output_dir="$w/run-type"
expect_stderr "type.toml:8:[0-9]+: .*train.epochs.*integer"
[ ! -e "$w/run-type" ] || fail "a rejected job left $w/run-type behind"
printf 'version = 1\n[job]\nkind = "rgnn"\n[data]\nformat = "synthetic"\n' > "$w/missing.toml"
expect_exit 2 "$TESSEL" validate "$w/missing.toml"
expect_stderr "missing.toml.*job.name"
expect_exit 2 "$TESSEL" validate "$w/unknown.toml" --set train.epochs=x
pass "job-file errors"

# --- RDF: a malformed triple is exit 3 naming file:line; a truncated .nt.gz is exit 3 naming the file
printf '<a> <p> <b> .\n<b> <p> "lit"@en .\n<c> <p> .\n' > "$w/bad.nt"
expect_exit 3 "$TESSEL" import rdf --triples "$w/bad.nt" --out "$w/bad.h5"
expect_stderr "bad.nt:3"
[ ! -e "$w/bad.h5" ] || fail "a failed import left bad.h5 behind"
for i in $(seq 1 3000); do echo "<http://x/s$i> <http://x/p$((i % 7))> <http://x/o$((i % 97))> ."; done | gzip -c > "$w/full.nt.gz"
head -c $(( $(stat -c %s "$w/full.nt.gz") / 2 )) "$w/full.nt.gz" > "$w/trunc.nt.gz"
expect_exit 3 "$TESSEL" import rdf --triples "$w/trunc.nt.gz" --out "$w/trunc.h5"
expect_stderr "trunc.nt.gz"
[ -z "$(ls "$w" | grep -E '^trunc\.h5')" ] || fail "a failed import left trunc.h5 (or a temp file) behind"
pass "RDF import errors"

# --- graph files: a truncated or foreign .h5 is exit 3 naming the file, for every command that reads it
"$TESSEL" import rdf --triples "$w/full.nt.gz" --out "$w/good.h5" >/dev/null
head -c $(( $(stat -c %s "$w/good.h5") / 2 )) "$w/good.h5" > "$w/cut.h5"
expect_exit 3 "$TESSEL" inspect "$w/cut.h5"
expect_stderr "cut.h5"
expect_exit 3 "$TESSEL" partition "$w/cut.h5" --parts 2 --out "$w/parts"
[ ! -e "$w/parts" ] || fail "a failed partition left $w/parts behind"
head -c 4096 /dev/urandom > "$w/noise.h5"
printf '%s\ngraph = "%s"\n' "${base/synthetic/graph}" "$w/noise.h5" > "$w/noise.toml"
expect_exit 3 "$TESSEL" run "$w/noise.toml" --set job.output_dir="$w/run-noise"
expect_stderr "noise.h5"
[ ! -e "$w/run-noise" ] || fail "a failed run left $w/run-noise behind"
pass "graph-file errors"

# --- a NaN node feature: exit 3 naming the file, the dataset, the node and the column (it never trains)
"$TESSEL" generate graph --nodes 300 --out "$w/nan.h5" >/dev/null
offset=$("$TESSEL" inspect --tree "$w/nan.h5" | sed -n 's/^ *features: float32 .*, contiguous at byte \([0-9]*\)$/\1/p' | head -1)
[ -n "$offset" ] || fail "tessel inspect --tree shows no byte offset for the features"
# The first features dataset is type0's; a little-endian float32 NaN (0x7fc00000) over its row 0, column 1.
printf '\x00\x00\xc0\x7f' | dd of="$w/nan.h5" bs=1 seek=$((offset + 4)) conv=notrunc status=none
printf '%s\ngraph = "%s"\n' "${base/synthetic/graph}" "$w/nan.h5" > "$w/nan.toml"
expect_exit 3 "$TESSEL" run "$w/nan.toml" --set job.output_dir="$w/run-nan"
expect_stderr "nan.h5: /nodes/type0/features: node type0:0 \(global id 0\) column 1 is NaN"
[ ! -e "$w/run-nan" ] || fail "a refused run left $w/run-nan behind"
pass "NaN feature refused"

# --- device: job.device = "cuda" without a usable GPU is refused before training, exit 2, with the reason
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "note: a GPU is visible here; the refusal of job.device = \"cuda\" without one is not exercised"
else
  printf '%s\n[data.synthetic]\nnodes = 300\n[train]\nepochs = 2\n[metrics]\nport_base = 0\n' "$base" > "$w/cuda.toml"
  expect_exit 2 "$TESSEL" run "$w/cuda.toml" --set job.device=cuda --set job.output_dir="$w/run-cuda"
  expect_stderr "job.device = \"cuda\" but this worker has no usable GPU: "
  [ ! -e "$w/run-cuda" ] || fail "a refused cuda run left $w/run-cuda behind"
  pass "job.device = \"cuda\" without a GPU: exit 2, naming the reason"
fi

# --- a checkpoint directory that cannot be written: exit 6 before the first step (not at the first
# checkpoint, with the steps before it lost), naming checkpoint.dir and the reason; no run directory left
printf '%s\n[data.synthetic]\nnodes = 300\n[train]\nepochs = 3\n[metrics]\nport_base = 0\n' "$base" > "$w/ckpt.toml"
echo "a file, not a directory" > "$w/not-a-dir"
expect_exit 6 "$TESSEL" run "$w/ckpt.toml" --set checkpoint.every_steps=2 --set checkpoint.dir="\"$w/not-a-dir/ckpt\"" \
  --set job.output_dir="\"$w/run-ckpt\""
expect_stderr "checkpoint.dir: cannot create $w/not-a-dir/ckpt: Not a directory"
grep -q "epoch 1/" "$TESSEL_WORK/stderr" && fail "the unwritable checkpoint.dir was found after training began"
[ ! -e "$w/run-ckpt" ] || fail "a run refused before its first step left $w/run-ckpt behind"
pass "unwritable checkpoint.dir: exit 6 before training, nothing left behind"

# --- data.feature_gather = "zero_copy" where it cannot run: exit 2 naming the key (the plan: a CPU job) or
# the worker (no GPU where job.device = "auto" let the plan through), before any training
"$TESSEL" generate graph --nodes 300 --out "$w/feat.h5" >/dev/null
printf '%s\ngraph = "%s"\n[train]\nmode = "sampled"\nbatch_size = 64\n[model]\ninput = "features"\n' \
  "${base/synthetic/graph}" "$w/feat.h5" > "$w/zc.toml"
expect_exit 2 "$TESSEL" run "$w/zc.toml" --set data.feature_gather='"zero_copy"' --set job.device='"cpu"' \
  --set job.output_dir="\"$w/run-zc\""
expect_stderr 'data.feature_gather = "zero_copy" has the GPU read feature rows from the pinned store in place, but job.device = "cpu"'
if ! nvidia-smi -L >/dev/null 2>&1; then  # with a GPU the worker would run it
  expect_exit 2 "$TESSEL" run "$w/zc.toml" --set data.feature_gather='"zero_copy"' --set data.feature_store='"pinned"' \
    --set job.output_dir="\"$w/run-zc2\""
  expect_stderr 'worker 0: data.feature_gather = "zero_copy", but this worker computes on the CPU'
  grep -q "epoch 1/" "$TESSEL_WORK/stderr" && fail "zero_copy without a GPU was refused only after training began"
fi
pass "data.feature_gather = \"zero_copy\" without a GPU: exit 2 naming the key or the worker"

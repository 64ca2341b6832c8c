#!/usr/bin/env bash
# First-epoch parity with the reference trainers (issue 18): for RGCN (full weights with one-hot and with
# feature input, bases, blocks), RGAT (concatenated and averaged heads) and HGT (with the skip gate, and
# one-hot; with PyG's biases, drawn as torch.nn.Linear draws them or zero), Tessel's initial parameters and its first epoch in double precision (rgnn_parity_export) against
# the same epoch computed in float64 by bench/peers/rgnn_reference.py from the same parameters: the loss,
# every gradient, the gradient of the whole objective (the regulariser included) and the Adam step to
# 1e-10, the initial values within their bounds (Glorot, or torch_linear's), Tessel's float executor
# to 2e-4, and Tessel's executor in double (train.precision = "fp64": the plugin kernels themselves, their
# double instantiations, through the layers, loss and Adam of a run) to 1e-10.
# Needs build/bench-venv with torch and PyG (bench/peers/setup.sh --peers; scripts/test.sh makes it).
# Without it the test is skipped, unless TESSEL_REQUIRE_DATA=1 (CI), which makes it a failure.
source "$(dirname "$0")/../lib.sh"

export_bin=${TESSEL_PARITY_EXPORT:-$TESSEL_SOURCE_DIR/build/tests/unit/workers/rgnn/rgnn_parity_export}
python=$TESSEL_SOURCE_DIR/build/bench-venv/bin/python
if ! [ -x "$python" ] || ! "$python" -c "import torch, torch_geometric" 2>/dev/null; then
  [ "${TESSEL_REQUIRE_DATA:-0}" = 1 ] && fail "build/bench-venv has no torch + torch_geometric (bench/peers/setup.sh --peers)"
  skip "build/bench-venv has no torch + torch_geometric: run bench/peers/setup.sh --peers"
fi

cases=(
  "rgcn-full-onehot model=rgcn input=onehot"
  "rgcn-full-features model=rgcn input=features layers=3"
  "rgcn-bases model=rgcn input=onehot bases=2"
  "rgcn-bases-features model=rgcn input=features bases=3"
  "rgcn-blocks model=rgcn input=features blocks=3"
  "rgat-concat model=rgat input=features heads=2"
  "rgat-mean-onehot model=rgat input=onehot heads=2 merge=mean"
  "hgt-skip model=hgt input=features heads=2"
  "hgt-onehot model=hgt input=onehot"
  "hgt-bias-torch-linear model=hgt input=features heads=2 bias=1 init=torch_linear"
  "hgt-bias-onehot model=hgt input=onehot bias=1"
)
files=()
for c in "${cases[@]}"; do
  read -ra words <<< "$c"
  "$export_bin" "$TESSEL_WORK" "${words[@]}" 2>"$TESSEL_WORK/export.log" || { cat "$TESSEL_WORK/export.log" >&2; fail "rgnn_parity_export ${words[0]}"; }
  files+=("$TESSEL_WORK/${words[0]}.json")
done
(cd bench/peers && "$python" rgnn_reference.py parity "${files[@]}") || fail "Tessel and the reference trainers differ"
pass "first-epoch parity: ${#cases[@]} cases"

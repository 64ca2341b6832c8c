#!/usr/bin/env bash
# bench/gpu/gpt_check.py, the prepared GPT run for a lent GPU machine (scripts/device-check.sh --bundle), at
# toy sizes on the CPU: every section it can run here runs and gives its rows (the CPU's losses against
# themselves, Tessel's against PyTorch's from one llm.c checkpoint, the ROK points and plot, sampled training with
# each feature gather), so that the
# script a GPU session has 15 minutes for does not fail on its plumbing. Needs build/bench-venv with torch.
source "$(dirname "$0")/../lib.sh"
python=$TESSEL_SOURCE_DIR/build/bench-venv/bin/python
if ! [ -x "$python" ] || ! "$python" -c "import torch" 2>/dev/null; then
  [ "${TESSEL_REQUIRE_DATA:-0}" = 1 ] && fail "build/bench-venv has no torch (bench/peers/setup.sh --peers)"
  skip "build/bench-venv has no torch: run bench/peers/setup.sh --peers"
fi
[ -f "$TESSEL_DATA_DIR/tinyshakespeare/input.txt" ] || missing_data "no tiny Shakespeare at $TESSEL_DATA_DIR"
out=$TESSEL_WORK/out
set +e
"$python" bench/gpu/gpt_check.py --out "$out" --device cpu --small --sections diagnose,repeat,speed,rok,sampled,sanitize \
  --budget 900 >"$TESSEL_WORK/table" 2>"$TESSEL_WORK/log"
rc=$?
set -e
cat "$TESSEL_WORK/table"
[ "$rc" -eq 0 ] || { tail -20 "$TESSEL_WORK/log"; fail "gpt_check.py exited $rc"; }
for row in "diagnose | init_from, embedded, as is | yes | 4/4 passed" "repeat | keep | yes | 2/2 ran" \
           "repeat | init_from | yes | 2/2 ran" "repeat | bf16 | yes | 2/2 ran" "speed | 124M fp32 | yes | Tessel" "speed | 4 blocks fp32 | yes" \
           "speed | 124M bf16 | yes | Tessel" \
           "plan | 124M | - | " "rok | plan | - | " "rok | auto / keep" "sanitize | compute-sanitizer | - |" \
           "sampled | synthetic 4000 nodes, 128 features: auto against host | yes" "sampled | AIFB rgcn, sampled"; do
  grep -qF "| $row" "$TESSEL_WORK/table" || fail "no row '$row'"
done
grep -q "<circle" "$out/rok.svg" || fail "rok.svg has no points"
[ "$(json "$out/gpt_check.json" 'len(s["rows"])')" -ge 18 ] || fail "gpt_check.json has too few rows"
pass "gpt_check.py --device cpu --small: every section's rows, losses agree, rok.svg drawn"

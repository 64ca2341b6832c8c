#!/usr/bin/env bash
# train.precision = "bf16" against "fp32" on gpt-shakespeare.toml (tiny Shakespeare, 4 blocks of width 256,
# byte vocabulary), 30 steps each on the CPU's reference kernels: every step's loss within 2% of fp32's,
# and the final validation loss within 0.02 nats (issue 17's acceptance). bf16 rounds every stored
# activation to 8 bits of mantissa, so the two runs differ from the first step on; a bf16 path that is
# wrong (a gradient dropped, a statistic kept in bf16, a missed rounding that overflows) lands far outside.
# Also checks that bf16 halves the activation bytes the run reports, and that a bf16 job on CUDA is a valid
# job file (the CUDA bf16 kernels exist).
source "$(dirname "$0")/../lib.sh"

text="$TESSEL_DATA_DIR/tinyshakespeare/input.txt"
if [ ! -f "$text" ]; then
  [ "${TESSEL_REQUIRE_DATA:-0}" = 1 ] && fail "$text is missing (TESSEL_REQUIRE_DATA=1)"
  skip "$text is missing"
fi

cut=(--set train.steps=30 --set train.warmup_steps=10 --set train.val_every=0 --set train.val_batches=8
     --set checkpoint.every_steps=0 --set job.device=\"cpu\" --set metrics.port_base=0
     --set data.text="\"$text\"")
for precision in fp32 bf16; do
  "$TESSEL" run jobs/examples/gpt-shakespeare.toml "${cut[@]}" --set train.precision=\"$precision\" \
    --set job.output_dir="$TESSEL_WORK/$precision" > "$TESSEL_WORK/$precision.log" 2>&1 \
    || { cat "$TESSEL_WORK/$precision.log" >&2; fail "the $precision run failed"; }
done

python3 - "$TESSEL_WORK/fp32/summary.json" "$TESSEL_WORK/bf16/summary.json" <<'PY' || fail "bf16 is not within the bounds"
import json, sys
fp32, bf16 = (json.load(open(p)) for p in sys.argv[1:3])
a, b = fp32["step_loss"], bf16["step_loss"]
assert len(a) == len(b) == 30, (len(a), len(b))
worst = max(abs(y - x) / x for x, y in zip(a, b))
where = max(range(30), key=lambda i: abs(b[i] - a[i]) / a[i])
print(f"step losses: fp32 {a[0]:.4f} -> {a[-1]:.4f}, bf16 {b[0]:.4f} -> {b[-1]:.4f}; "
      f"largest relative difference {worst:.2%} at step {where + 1}")
assert a[-1] < a[0] - 0.5, "fp32 did not learn: the comparison would prove little"
assert worst <= 0.02, f"step {where + 1}: bf16 {b[where]} against fp32 {a[where]}"
dv = abs(bf16["final_val_loss"] - fp32["final_val_loss"])
print(f"final validation loss: fp32 {fp32['final_val_loss']:.4f}, bf16 {bf16['final_val_loss']:.4f}, "
      f"difference {dv:.4f} nats")
assert dv <= 0.02, dv
ka, kb = fp32["saved_activation_bytes_per_token_keep_all"], bf16["saved_activation_bytes_per_token_keep_all"]
print(f"saved bytes a token and block: fp32 {ka}, bf16 {kb}")
# 10 C activations halve; the 2 + H f32 statistics stay (C = 256, H = 4).
assert ka == 10 * 256 * 4 + 6 * 4 and kb == 10 * 256 * 2 + 6 * 4, (ka, kb)
assert bf16["peak_resident_activation_bytes"] < 0.55 * fp32["peak_resident_activation_bytes"]
# One logits buffer of B T V activations: 4 bytes each in fp32, 2 in bf16.
assert fp32["classifier_logits_bytes"] == 8 * 256 * 256 * 4 and bf16["classifier_logits_bytes"] == 8 * 256 * 256 * 2
PY

# bf16 has CUDA kernels now: a bf16 job on CUDA is a valid job file.
expect_exit 0 "$TESSEL" validate jobs/examples/gpt-shakespeare.toml --set train.precision=\"bf16\" \
  --set job.device=\"cuda\" --set data.text="\"$text\""
pass "bf16 within 2% of fp32 at every step and 0.02 nats at the end"

#!/usr/bin/env bash
# A model is a layer file and its ops: the test-only RGNN model "mean" (tests/integration/toy_model/
# mean_model.cc, registered by one line, touching nothing in jobs/, the planners, the settings or the
# executors) trains through `tessel run`: embedded, and under mpirun -np 3 with 2 workers. The same job is
# refused by the plain `tessel`, whose registry lacks the model, naming the models it has (exit 2).
# The model's own key, model.mean_relu (declared in mean_model.cc alone), is a job key of the toy build:
# set to false it reaches the layers (a linear model trains another trajectory), and job.toml records it;
# the plain `tessel` does not know it, and the toy build refuses it for another model (exit 2).
source "$(dirname "$0")/../lib.sh"
TOY=${TESSEL_TOY_MODEL:-$TESSEL_SOURCE_DIR/build/bin/tessel-toy-model}
[ -x "$TOY" ] || fail "no $TOY (build the tessel-toy-model target)"
job=jobs/examples/rgcn-synthetic.toml
sets=(--set model.name=\"mean\" --set model.input=\"features\" --set data.synthetic.nodes=3000
      --set data.synthetic.feature_dim=16 --set train.epochs=20 --set job.device=\"cpu\" --set metrics.port_base=0
      --set data.graph="$TESSEL_WORK/graph.h5")

expect_exit 2 "$TESSEL" validate "$job" "${sets[@]}"
expect_stderr 'model.name = "mean" is not an RGNN model of this build \(it has "rgcn", "rgat", "hgt"\)'
expect_exit 0 "$TOY" validate "$job" "${sets[@]}"
expect_exit 2 "$TESSEL" validate "$job" --set model.mean_relu=false
expect_stderr "unknown key 'model.mean_relu'"
expect_exit 2 "$TOY" validate "$job" --set model.mean_relu=false
expect_stderr '--set model.mean_relu=false: model.mean_relu = false is a key of model.name = "mean", and this job trains "rgcn"'
expect_exit 2 "$TOY" validate "$job" "${sets[@]}" --set model.mean_relu=1
expect_stderr 'model.mean_relu'

"$TOY" run "$job" "${sets[@]}" --set resources.workers=1 --set job.output_dir="$TESSEL_WORK/np1" \
  > "$TESSEL_WORK/np1.log" 2>&1 || { cat "$TESSEL_WORK/np1.log" >&2; fail "the embedded run failed"; }
mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np 3 "$TOY" run "$job" "${sets[@]}" --set resources.workers=2 \
  --set job.output_dir="$TESSEL_WORK/np3" > "$TESSEL_WORK/np3.log" 2>&1 \
  || { cat "$TESSEL_WORK/np3.log" >&2; fail "the -np 3 run failed"; }
"$TOY" run "$job" "${sets[@]}" --set model.mean_relu=false --set resources.workers=1 \
  --set job.output_dir="$TESSEL_WORK/linear" > "$TESSEL_WORK/linear.log" 2>&1 \
  || { cat "$TESSEL_WORK/linear.log" >&2; fail "the run with model.mean_relu = false failed"; }
grep -qx 'mean_relu = false' "$TESSEL_WORK/linear/job.toml" || fail "job.toml does not record model.mean_relu = false"
grep -qx 'mean_relu = true' "$TESSEL_WORK/np1/job.toml" || fail "job.toml does not record model.mean_relu's default"

python3 - "$TESSEL_WORK" <<'PY'
import json, sys
w = sys.argv[1]
runs = {m: json.load(open(f"{w}/{m}/summary.json")) for m in ("np1", "np3")}
for name, s in runs.items():
    assert s["model"] == "mean", (name, s["model"])
    loss = s["epoch_loss"]
    assert len(loss) == 20, (name, len(loss))
    assert loss[-1] < 0.3 * loss[0], f"{name}: the loss did not fall: {loss[0]} -> {loss[-1]}"
    # 4 classes: above a guess (one weight for every relation learns less than RGCN; this is about the
    # plumbing, and the run is deterministic).
    assert s["train_accuracy"] > 0.3, f"{name}: train accuracy {s['train_accuracy']}"
    print(f"{name}: loss {loss[0]:.4f} -> {loss[-1]:.4f}, train accuracy {s['train_accuracy']:.3f}, "
          f"test accuracy {s['test_accuracy']:.3f}")
a, b = runs["np1"]["epoch_loss"], runs["np3"]["epoch_loss"]
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
assert worst < 1e-5, f"1 and 2 workers train different models: relative loss difference {worst:.2e}"
print(f"1 vs 2 workers: worst relative loss difference {worst:.1e}")
linear = json.load(open(f"{w}/linear/summary.json"))["epoch_loss"]
moved = max(abs(x - y) / abs(x) for x, y in zip(a, linear))
assert moved > 1e-3, f"model.mean_relu = false trained the same model as the default: {moved:.2e}"
print(f"model.mean_relu = false: losses move by up to {moved:.1e} (relative)")
PY
pass "the toy model \"mean\" trains through tessel run (embedded and -np 3)"

#!/usr/bin/env bash
# With a fixed seed, the embedded run and 1, 2 and 3 workers under mpirun (-np 2, 3, 4) give the same
# training, for each model (RGCN, RGAT, HGT):
# - RGCN: every epoch's loss agrees to 1e-6 relative (1e-9 absolute once below 1e-3; about 2e-7 is what
#   float summation order leaves), and the test predictions agree exactly (test_correct, test_total);
# - RGAT and HGT: every epoch's loss agrees to 1e-5 relative on AIFB (1e-4 on the synthetic fallback: their
#   softmax backward sums more terms in an order that follows the partition), and on AIFB the test
#   predictions agree exactly;
# - every model's final parameters (the last epoch's checkpoint: each tensor's L2 norm and a fixed random
#   projection, tests/cluster/checkpoint_tool.cc) agree to the same tolerance.
# Uses AIFB when the shared data is present. Without it, the generated demo graph stands in and the test
# ends skipped (exit 77), naming the missing path: the synthetic runs say the orchestration is exact, but
# the AIFB check did not run. With TESSEL_REQUIRE_DATA=1 a missing AIFB fails at once. It says which graph,
# before the runs and in its PASS lines.
source "$(dirname "$0")/../lib.sh"
data_required && need_aifb
if have_aifb; then
  graph=aifb
  graph_note="AIFB ($TESSEL_DATA_DIR/aifb)"
  # One import, shared by every run.
  data_sets=(--set data.graph="$TESSEL_WORK/graph.h5" --set data.triples="$TESSEL_DATA_DIR/aifb/aifb_stripped.nt.gz"
             --set data.train_labels="$TESSEL_DATA_DIR/aifb/trainingSet.tsv"
             --set data.test_labels="$TESSEL_DATA_DIR/aifb/testSet.tsv")
  job_of() { echo "jobs/examples/$1-aifb.toml"; }
  model_sets=()
else
  graph=synthetic
  graph_note="the generated synthetic graph: FALLBACK, no AIFB data at $TESSEL_DATA_DIR/aifb"
  # 25 epochs: RGCN's loss gets to about 0.03. Trained on to 0.003 (30 epochs), the same absolute
  # rounding differences (a few 1e-9) are close to 1e-6 of the loss, which says nothing about the
  # orchestration.
  data_sets=(--set data.graph="$TESSEL_WORK/graph.h5" --set train.epochs=25)
  job_of() { echo "jobs/examples/rgcn-synthetic.toml"; }
fi
echo "exactness: graph = $graph_note"

for model in rgcn rgat hgt; do
  job=$(job_of $model)
  sets=("${data_sets[@]}" --set job.seed=7 --set metrics.port_base=0 --set model.name=$model)
  # HGT on two layers here (the AIFB example has one), so that its hidden rows cross the halo exchange.
  [ $model = hgt ] && sets+=(--set model.layers=2)
  [ $model = hgt ] && [ $graph = synthetic ] && sets+=(--set model.heads=2)
  # The demo graph's features are not normalised (entries of size ~4): at the example's lr 1e-2 Adam turns
  # the ~1e-7 rounding differences of RGAT's and HGT's softmax backward (summed in another order per
  # partition) into loss differences over 1e-4 (RGAT by epoch 9, HGT by epoch 2; HGT at 3e-4 still by
  # epoch 8). As sampled_exactness.sh does for the same reason: RGAT at 1e-3 (worst 1e-5 over 25
  # epochs), HGT at 3e-4 for 3 epochs (worst 8e-6).
  [ $model = rgat ] && [ $graph = synthetic ] && sets+=(--set train.lr=1e-3)
  [ $model = hgt ] && [ $graph = synthetic ] && sets+=(--set train.lr=3e-4 --set train.epochs=3)
  # The last epoch's checkpoint holds the final parameters (every worker's copy is the same, allreduced).
  epochs=$(python3 -c "import tomllib, sys; print(tomllib.load(open(sys.argv[1], 'rb'))['train']['epochs'])" "$job")
  for s in "${sets[@]}"; do [[ $s == train.epochs=* ]] && epochs=${s#train.epochs=}; done
  sets+=(--set checkpoint.every_steps="$epochs" --set checkpoint.keep=1)
  out="$TESSEL_WORK/$model"
  echo "exactness: $model, job $job"
  "$TESSEL" run "$job" "${sets[@]}" --set job.output_dir="$out/np1" > /dev/null
  for np in 2 3 4; do
    mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np $np "$TESSEL" run "$job" "${sets[@]}" \
      --set job.output_dir="$out/np$np" > /dev/null
  done
  for np in 1 2 3 4; do
    "$TESSEL_CHECKPOINT_TOOL" norms "$out/np$np/checkpoints/step-$epochs/worker-0.h5" > "$out/np$np/norms.txt" ||
      fail "$model -np $np: no final checkpoint to compare the parameters of"
    # 150 MB a worker for AIFB's RGCN and RGAT: gone once read, or the test holds 2 GB while it runs.
    rm -rf "$out/np$np/checkpoints"
  done
  python3 - "$out" "$graph" "$graph_note" "$model" <<'PY'
import json, sys
w, graph, graph_note, model = sys.argv[1:5]
exact = model == "rgcn"
# Relative; absolute once a loss is below 1e-3. RGAT and HGT: on AIFB the worst difference measured over
# -np 1..4 is 7.3e-9 (RGAT) and 7.6e-7 (HGT), so 1e-5 leaves 13x; on the synthetic fallback 1e-5 is
# measured (its features are not normalised), so there 1e-4.
REL, ABS = (1e-6, 1e-9) if exact else ((1e-5, 1e-8) if graph == "aifb" else (1e-4, 1e-7))
runs = {np: json.load(open(f"{w}/np{np}/summary.json")) for np in (1, 2, 3, 4)}
ref = runs[1]
worst = worst_param = 0.0
for np, s in runs.items():
    assert s["workers"] == max(1, np - 1), (np, s["workers"])
    assert s["model"] == model, f"-np {np} trained {s['model']!r}, expected {model}"
    name = s["graph"]["name"]
    assert (name == "synthetic") == (graph == "synthetic"), f"-np {np} trained on graph {name!r}, expected {graph}"
    loss = s["epoch_loss"]
    assert len(loss) == len(ref["epoch_loss"]), f"-np {np}: {len(loss)} epochs, expected {len(ref['epoch_loss'])}"
    for e, (a, b) in enumerate(zip(ref["epoch_loss"], loss), 1):
        if min(abs(a), abs(b)) < 1e-3:
            ok = abs(a - b) <= ABS
        else:
            ok = abs(a - b) <= REL * abs(a)
        worst = max(worst, abs(a - b) / max(abs(a), 1e-12))
        assert ok, (f"{model} -np {np} epoch {e}: loss {b!r} vs embedded {a!r} "
                    f"(relative difference {abs(a - b) / abs(a):.2e}, limit {REL:g})")
    for key in ("test_total", "test_correct") if exact or graph == "aifb" else ("test_total",):
        assert s[key] == ref[key], f"{model} -np {np}: {key} = {s[key]}, embedded {ref[key]}"
    assert s["test_total"] > 0, f"{model} -np {np}: no test nodes"
    # The final parameters: each tensor's L2 norm and a fixed random projection, to the loss's tolerance.
    def norms(n):
        return {f[0]: (int(f[1]), float(f[2]), float(f[3])) for f in (l.split() for l in open(f"{w}/np{n}/norms.txt"))}
    mine, base = norms(np), norms(1)
    assert mine.keys() == base.keys() and base, f"{model} -np {np}: parameters {sorted(mine)} vs {sorted(base)}"
    for name, (count, l2, probe) in base.items():
        c, l, p = mine[name]
        assert c == count and abs(l - l2) <= REL * l2 and abs(p - probe) <= REL * l2, \
            f"{model} -np {np}: final {name} differs: |w| {l!r} vs {l2!r}, projection {p!r} vs {probe!r}"
        worst_param = max(worst_param, abs(l - l2) / l2, abs(p - probe) / l2)
print(f"PASS [{graph_note}] {model}: {len(ref['epoch_loss'])} epochs equal across -np 1/2/3/4 "
      f"(worst relative difference {worst:.2e}, limit {REL:g}); test correct "
      + ", ".join(f"np{np}={s['test_correct']}/{s['test_total']}" for np, s in runs.items())
      + "; final losses " + ", ".join(f"np{np}={s['epoch_loss'][-1]:.6f}" for np, s in runs.items())
      + f"; final parameters agree (worst relative difference {worst_param:.2e})")
PY
done
[ $graph = aifb ] ||
  missing_data "the synthetic fallback passed, but the AIFB check did not run: no AIFB data at $TESSEL_DATA_DIR/aifb"

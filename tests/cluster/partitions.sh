#!/usr/bin/env bash
# Training from part files (data.format = "partitions"): `tessel partition` cuts a generated graph into
# 1, 2 and 3 parts with the job's default method and seed, and RGCN, RGAT and HGT trained from those parts
# under mpirun (each worker reads its own part-K.h5, the coordinator only partition.json) give the same
# epoch losses, bit for bit, and the same test predictions as the coordinator's own path on the same graph
# (it reads the whole graph and cuts it with the same method and seed). The reference is that path, which
# exactness.sh holds to the embedded run and PyTorch (rgnn_parity.sh) in turn; and a first loss within
# 1e-6 of the one-part run's, which has no halo (a part carries only its owned rows' features: a worker
# takes its halo rows' from their owners). `tessel plan` predicts the
# same worker table from partition.json alone as from the graph.
# Sampled training from the parts too (structure partitioned) against the coordinator's sampled path
# (structure replicated), bit for bit.
# Then each bad input: a part count that differs from the workers (exit 2), a partition.seed other than
# the cut's (2), no partition.json (2), a corrupt one (3), a missing, truncated or foreign part file (3,
# naming the file): none trains.
source "$(dirname "$0")/../lib.sh"
export TESSEL  # scripts/tessel-mpirun runs it

graph=$TESSEL_WORK/graph.h5
"$TESSEL" generate graph --out "$graph" --nodes 3000 --node-types 3 --relations 4 --classes 4 --avg-degree 6 \
  --feature-dim 16 > /dev/null || fail "tessel generate graph failed"
common=(--set data.format=graph --set data.graph="$graph" --set train.epochs=6 --set metrics.port_base=0
        --set job.device=cpu --set job.seed=3)

run_job() {  # run_job OUT WORKERS EXTRA_SETS...: a job under mpirun, quiet unless it fails
  local out=$1 workers=$2; shift 2
  "$TESSEL_SOURCE_DIR/scripts/tessel-mpirun" -np $((workers + 1)) jobs/examples/rgcn-synthetic.toml "${common[@]}" --set resources.workers="$workers" --set job.output_dir="$out" "$@" > "$out.log" 2>&1 ||
    { cat "$out.log"; fail "the run in $out failed"; }
}

for workers in 1 2 3; do
  "$TESSEL" partition "$graph" --parts $workers --out "$TESSEL_WORK/parts-$workers" > /dev/null ||
    fail "tessel partition --parts $workers failed"
done
for model in rgcn rgat hgt; do
  sets=(--set model.name=$model)
  [ $model = hgt ] && sets+=(--set model.heads=2)
  for workers in 1 2 3; do
    base=$TESSEL_WORK/$model-$workers
    run_job "$base-graph" $workers "${sets[@]}"
    run_job "$base-parts" $workers "${sets[@]}" --set data.format=partitions --set data.graph= \
      --set data.partitions="$TESSEL_WORK/parts-$workers"
    python3 - "$base-graph/summary.json" "$base-parts/summary.json" "$TESSEL_WORK/$model-1-parts/summary.json" \
      "$model" "$workers" <<'PY' ||
import json, math, sys
a, b, one = (json.load(open(p)) for p in sys.argv[1:4])
model, workers = sys.argv[4], int(sys.argv[5])
assert b["workers"] == workers and b["model"] == model, (b["workers"], b["model"])
assert len(a["epoch_loss"]) == 6, a["epoch_loss"]
assert a["epoch_loss"] == b["epoch_loss"], f"{model} x {workers}: {a['epoch_loss']} vs {b['epoch_loss']}"
for key in ("test_correct", "test_total"):
    assert a[key] == b[key], f"{model} x {workers}: {key} {a[key]} vs {b[key]}"
# The single worker has no halo: the same first loss up to the order of float sums (later ones drift
# further, Adam amplifying it) says that every halo row (its input features, taken from its owner at
# load, and its activations) arrived.
x, y = b["epoch_loss"], one["epoch_loss"]
assert math.isclose(x[0], y[0], rel_tol=1e-6) and all(math.isclose(p, q, rel_tol=1e-2) for p, q in zip(x, y)), \
    f"{model} x {workers}: {x} vs one worker's {y}"
print(f"{model} x {workers}: {len(a['epoch_loss'])} losses bit-identical (last {b['epoch_loss'][-1]!r}), "
      f"the first within 1e-6 of one worker's, test {b['test_correct']}/{b['test_total']}")
PY
      fail "$model with $workers workers trains differently from part files"
  done
done

# A streamed halo (train.halo = "streamed": no halo rows kept, each peer's block run as it arrives): from the
# parts as from the graph, bit for bit; within float rounding of the resident runs above (the same sums in
# another order); refused for RGAT (below), whose softmax spans all of a node's edges.
for workers in 2 3; do
  base=$TESSEL_WORK/rgcn-$workers-streamed
  run_job "$base-graph" $workers --set train.halo=streamed
  run_job "$base-parts" $workers --set train.halo=streamed --set data.format=partitions --set data.graph= \
    --set data.partitions="$TESSEL_WORK/parts-$workers"
  python3 - "$base-graph/summary.json" "$base-parts/summary.json" "$TESSEL_WORK/rgcn-$workers-parts/summary.json" \
    "$workers" <<'PY' ||
import json, math, sys
a, b, resident = (json.load(open(p)) for p in sys.argv[1:4])
assert a["epoch_loss"] == b["epoch_loss"], f"streamed x {sys.argv[4]}: {a['epoch_loss']} vs {b['epoch_loss']}"
x, y = b["epoch_loss"], resident["epoch_loss"]
assert len(x) == 6 and all(math.isclose(p, q, rel_tol=1e-5) for p, q in zip(x, y)), f"{x} vs resident {y}"
assert b["halo_bytes_sent"] > resident["halo_bytes_sent"], "a streamed halo moves the rows again in backward"
print(f"streamed x {sys.argv[4]}: bit-identical from the parts, within 1e-5 of resident ({x[-1]!r} vs {y[-1]!r})")
PY
    fail "a streamed halo with $workers workers trains differently"
done

# Sampled training from the same parts: each worker samples from its own part's in-edges (structure
# partitioned, the owners drawing their nodes' neighbours) and serves its own rows from the part file;
# the reference is the coordinator's path with the same cut, its structure replicated. Bit for bit, and
# with the same feature-row traffic (the same blocks, the same owners).
for model in rgcn rgat hgt; do
  sets=(--set model.name=$model --set train.mode=sampled --set train.epochs=3 --set train.batch_size=128)
  [ $model = hgt ] && sets+=(--set model.heads=2)
  for workers in 1 2 3; do
    base=$TESSEL_WORK/$model-$workers-sampled
    run_job "$base-graph" $workers "${sets[@]}"
    run_job "$base-parts" $workers "${sets[@]}" --set data.format=partitions --set data.graph= \
      --set data.partitions="$TESSEL_WORK/parts-$workers"
    python3 - "$base-graph/summary.json" "$base-parts/summary.json" "$model" "$workers" <<'PY' ||
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
model, workers = sys.argv[3], int(sys.argv[4])
assert a["train_mode"] == b["train_mode"] == "sampled", (a["train_mode"], b["train_mode"])
assert (a["structure"], b["structure"]) == ("replicated", "partitioned"), (a["structure"], b["structure"])
assert len(a["epoch_loss"]) == 3, a["epoch_loss"]
assert a["epoch_loss"] == b["epoch_loss"], f"{model} x {workers}: {a['epoch_loss']} vs {b['epoch_loss']}"
for key in ("test_correct", "test_total", "feature_rows_local", "feature_rows_remote"):
    assert a[key] == b[key], f"{model} x {workers}: {key} {a[key]} vs {b[key]}"
assert workers == 1 or b["feature_rows_remote"] > 0, "no row came from another worker"
print(f"{model} x {workers} sampled: {len(a['epoch_loss'])} losses bit-identical (last {b['epoch_loss'][-1]!r}), "
      f"test {b['test_correct']}/{b['test_total']}, {b['feature_rows_remote']} remote rows")
PY
      fail "$model with $workers workers samples differently from part files"
  done
done
# A replicated structure cannot come from part files: refused before any worker starts.
expect_exit 2 "$TESSEL" validate jobs/examples/rgcn-synthetic.toml --set train.mode=sampled \
  --set data.format=partitions --set data.partitions="$TESSEL_WORK/parts-2" --set data.structure=replicated
grep -q 'data.structure = "replicated" puts the whole graph on every worker' "$TESSEL_WORK/stderr" ||
  { cat "$TESSEL_WORK/stderr"; fail "no data.structure error"; }

# `tessel plan` from partition.json alone predicts each worker's sizes, memory and epoch as from the graph.
for workers in 2 3; do
  for how in graph partitions; do
    sets=(--set data.format=$how --set resources.workers=$workers)
    [ $how = graph ] && sets+=(--set data.graph="$graph") || sets+=(--set data.partitions="$TESSEL_WORK/parts-$workers")
    "$TESSEL" plan jobs/examples/rgcn-synthetic.toml "${sets[@]}" > "$TESSEL_WORK/plan-$how.txt" ||
      fail "tessel plan from $how failed"
    sed -n '/^worker/,$p' "$TESSEL_WORK/plan-$how.txt" > "$TESSEL_WORK/plan-$how.rows"
  done
  [ "$(wc -l < "$TESSEL_WORK/plan-graph.rows")" -eq $((workers + 1)) ] || fail "no worker table in tessel plan"
  diff "$TESSEL_WORK/plan-graph.rows" "$TESSEL_WORK/plan-partitions.rows" ||
    fail "tessel plan from partition.json predicts otherwise than from the graph ($workers workers)"
done
echo "tessel plan from partition.json: the same worker table as from the graph (2 and 3 workers)"

# Bad inputs: each refused with its exit code and a message naming the file; no run trains.
bad() {  # bad CODE PATTERN DIR [WORKERS [SETS...]]
  local code=$1 pattern=$2 dir=$3 workers=${4:-2}
  shift $(( $# < 4 ? $# : 4 ))
  nbad=$((nbad + 1))
  local out=$TESSEL_WORK/bad-run-$nbad
  expect_exit "$code" "$TESSEL_SOURCE_DIR/scripts/tessel-mpirun" -np $((workers + 1)) \
    jobs/examples/rgcn-synthetic.toml "${common[@]}" --set resources.workers="$workers" --set data.format=partitions \
    --set data.graph= --set data.partitions="$dir" --set job.output_dir="$out" "$@"
  grep -q -e "$pattern" "$TESSEL_WORK/stderr" || { cat "$TESSEL_WORK/stderr"; fail "no '$pattern' in the error"; }
  ! [ -f "$out/summary.json" ] || fail "a refused run wrote a summary"
  echo "refused (exit $code): $(grep -m1 -e "$pattern" "$TESSEL_WORK/stderr" | cut -c1-200)"
}
nbad=0
copy() { rm -rf "$TESSEL_WORK/$2" && cp -r "$TESSEL_WORK/$1" "$TESSEL_WORK/$2"; }

bad 2 "holds 3 parts, but the job has 2 workers" "$TESSEL_WORK/parts-3"
bad 2 'train.halo = "streamed" runs a layer one block of input rows at a time' "$TESSEL_WORK/parts-2" 2 \
  --set model.name=rgat --set train.halo=streamed
bad 2 "partition.seed = 5, but the parts in .* were cut with partition.seed = 0" "$TESSEL_WORK/parts-2" 2 \
  --set partition.seed=5
copy parts-2 no-manifest && rm "$TESSEL_WORK/no-manifest/partition.json"
bad 2 "no-manifest/partition.json" "$TESSEL_WORK/no-manifest"
copy parts-2 bad-manifest && head -c 100 "$TESSEL_WORK/parts-2/partition.json" > "$TESSEL_WORK/bad-manifest/partition.json"
bad 3 "bad-manifest/partition.json: invalid JSON" "$TESSEL_WORK/bad-manifest"
copy parts-2 no-part && rm "$TESSEL_WORK/no-part/part-1.h5"
bad 3 "no-part/part-1.h5" "$TESSEL_WORK/no-part"
copy parts-2 cut-part && head -c 4096 "$TESSEL_WORK/parts-2/part-0.h5" > "$TESSEL_WORK/cut-part/part-0.h5"
bad 3 "cut-part/part-0.h5" "$TESSEL_WORK/cut-part"
# Sampled: worker 0 cannot read its part while worker 1 has read its own; the run still ends, exit 3.
bad 3 "cut-part/part-0.h5" "$TESSEL_WORK/cut-part" 2 --set train.mode=sampled
# A part of another graph, under the same name: its hash is not the one partition.json names.
"$TESSEL" generate graph --out "$TESSEL_WORK/other.h5" --nodes 3000 --node-types 3 --relations 4 --classes 4 \
  --avg-degree 6 --feature-dim 16 --seed 9 > /dev/null || fail "tessel generate graph --seed 9 failed"
"$TESSEL" partition "$TESSEL_WORK/other.h5" --parts 2 --out "$TESSEL_WORK/other-parts" > /dev/null ||
  fail "tessel partition of the other graph failed"
copy parts-2 foreign-part && cp "$TESSEL_WORK/other-parts/part-1.h5" "$TESSEL_WORK/foreign-part/part-1.h5"
bad 3 "foreign-part/part-1.h5: cut from the graph with hash" "$TESSEL_WORK/foreign-part"
pass "training from part files: RGCN, RGAT and HGT x 1, 2, 3 workers, full-graph and sampled, as from the graph, bit for bit; 9 bad inputs refused"

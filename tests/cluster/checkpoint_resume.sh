#!/usr/bin/env bash
# Checkpoints and `tessel run --resume` (DESIGN.md "Checkpoints"), for a GPT pipeline job (2 stages under
# mpirun), a GPT job of 2 data-parallel replicas with an offloading block, an RGCN job (2 workers) and the
# same RGCN in sampled mode, each:
# - killed: the whole job (mpirun and every rank) gets SIGKILL once a checkpoint exists; `--resume`
#   continues from the checkpoint and every loss after it, the validation losses included, equals the
#   uninterrupted run's exactly;
# - damaged: a copy of the finished run's checkpoints whose newest shard has one byte flipped is refused
#   (its CRC-32 differs from the manifest) and the resume falls back to the previous checkpoint, saying so,
#   with the same losses;
# - the checkpoint directory holds `checkpoint.keep` checkpoints and `latest` names the newest.
source "$(dirname "$0")/../lib.sh"


# run_killed DIR NP JOB SETS...: runs under mpirun, SIGKILLs everything once DIR/checkpoints/latest exists.
run_killed() {
  local dir=$1 np=$2; shift 2
  mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np "$np" "$TESSEL" run "$@" --set job.output_dir="$dir" \
    >"$dir.log" 2>&1 </dev/null &
  local launcher=$!
  for _ in $(seq 1 3000); do [ -f "$dir/checkpoints/latest" ] && break; sleep 0.01; done
  kill -9 $(descendants $launcher) $launcher 2>/dev/null || true
  wait $launcher 2>/dev/null || true
  [ -f "$dir/checkpoints/latest" ] || { cat "$dir.log"; fail "no checkpoint was written before the kill"; }
  [ ! -f "$dir/summary.json" ] || fail "the job finished before it was killed: make it longer"
}

# compare KIND UNCUT RESUMED SINCE [perturbed]: the resumed run (started at unix time SINCE) ran exactly the
# steps after its checkpoint, each once on every rank (ran_after, tests/lib.sh); every loss from the
# resumed step on is the uninterrupted run's, or, "perturbed" (a parameter of the checkpoint changed),
# every loss up to it is and every later one differs.
compare() {
  local kind=$1 uncut=$2 resumed=$3 since=$4 unit=step
  [ "$kind" = llm ] || unit=epoch
  local k n
  k=$(json "$resumed/summary.json" "s.get('resumed_from_$unit', 0)") n=$(json "$uncut/summary.json" "len(s['${unit}_loss'])")
  ran_after "$resumed" "$since" $((k + 1)) "$n" >/dev/null || return 1
  shift 4
  python3 - "$kind" "$uncut" "$resumed" "$@" <<'PY'
import json, sys
kind, uncut, resumed = sys.argv[1:4]
perturbed = len(sys.argv) > 4
a, b = json.load(open(f"{uncut}/summary.json")), json.load(open(f"{resumed}/summary.json"))
unit = "step" if kind == "llm" else "epoch"
k = b.get(f"resumed_from_{unit}")
assert k is not None, f"{resumed}: not a resumed run"
la, lb = a[f"{unit}_loss"], b[f"{unit}_loss"]
assert 0 < k < len(la), f"resumed from {unit} {k} of {len(la)}"
if perturbed:
    assert la[:k] == lb[:k], f"{unit} losses up to the checkpoint differ:\n{la[:k]}\n{lb[:k]}"
    same = [i + 1 for i in range(k, len(la)) if la[i] == lb[i]]
    assert not same, f"a parameter of the checkpoint was changed, yet {unit}s {same} have the uncut run's losses"
    print(f"{kind}: resumed after {unit} {k} from a changed parameter; all {len(la) - k} later losses differ")
    sys.exit(0)
assert la == lb, f"{unit} losses differ:\n{la}\n{lb}"
if kind == "llm":
    assert a["val_loss"] == b["val_loss"], (a["val_loss"], b["val_loss"])
else:
    assert a["test_accuracy"] == b["test_accuracy"], (a["test_accuracy"], b["test_accuracy"])
print(f"{kind}: resumed after {unit} {k}; the {len(la) - k} {unit}s after it ran once each, with the uninterrupted run's losses")
PY
}

# perturb STEP_DIR: adds 0.01 to one parameter of worker 0's shard and writes its new size and CRC-32 into
# the manifest, so that the checkpoint stays valid.
perturb() {
  local out
  out=$("$TESSEL_CHECKPOINT_TOOL" perturb "$1/worker-0.h5") || fail "cannot perturb $1/worker-0.h5"
  python3 - "$1/manifest.json" $out <<'PY'
import json, sys
path, name, size, crc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m = json.load(open(path))
shard = next(s for s in m["shards"] if s["file"] == "worker-0.h5")
shard["bytes"], shard["crc32"] = size, crc
json.dump(m, open(path, "w"), indent=2)
PY
}

check_job() {  # NAME NP JOB KIND EVERY KEEP SETS...
  local name=$1 np=$2 job=$3 kind=$4 every=$5 keep=$6; shift 6
  local sets=("$@" --set checkpoint.every_steps="$every" --set checkpoint.keep="$keep" --set metrics.port_base=0)
  local w=$TESSEL_WORK/$name
  mkdir -p "$w"
  mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np "$np" "$TESSEL" run "$job" "${sets[@]}" \
    --set job.output_dir="$w/uncut" > "$w/uncut.log" 2>&1 || { cat "$w/uncut.log"; fail "$name: the uncut run failed"; }
  # keep checkpoints remain, the newest named by latest.
  local left
  left=$(ls -d "$w"/uncut/checkpoints/step-* | wc -l)
  [ "$left" -eq "$keep" ] || fail "$name: $left checkpoints left, checkpoint.keep = $keep"
  local newest
  newest=$(ls -d "$w"/uncut/checkpoints/step-* | sed 's/.*step-//' | sort -n | tail -1)
  [ "$(cat "$w/uncut/checkpoints/latest")" = "step-$newest" ] || fail "$name: latest is not step-$newest"

  run_killed "$w/killed" "$np" "$job" "${sets[@]}"
  # A copy of the killed run whose checkpoint has one parameter changed, resumed the same way.
  cp -r "$w/killed" "$w/perturbed"
  perturb "$w/perturbed/checkpoints/$(cat "$w/perturbed/checkpoints/latest")"
  local since
  since=$(date +%s.%N)
  mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np "$np" "$TESSEL" run "$job" "${sets[@]}" \
    --set job.output_dir="$w/killed" --resume > "$w/resumed.log" 2>&1 || { cat "$w/resumed.log"; fail "$name: the resume failed"; }
  local got
  got=$(compare "$kind" "$w/uncut" "$w/killed" "$since") || fail "$name: the resume after SIGKILL"
  pass "$name killed with SIGKILL: $got"
  since=$(date +%s.%N)
  mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np "$np" "$TESSEL" run "$job" "${sets[@]}" \
    --set job.output_dir="$w/perturbed" --resume > "$w/perturbed.log" 2>&1 || { cat "$w/perturbed.log"; fail "$name: the perturbed resume failed"; }
  got=$(compare "$kind" "$w/uncut" "$w/perturbed" "$since" perturbed) || fail "$name: the resume from a changed parameter"
  pass "$name resumed from a changed parameter: $got"

  # Damage the newest checkpoint of a finished run: one byte in the middle of worker 1's shard.
  cp -r "$w/uncut" "$w/damaged"
  rm "$w/damaged/summary.json"
  local shard=$w/damaged/checkpoints/step-$newest/worker-1.h5
  local size
  size=$(stat -c %s "$shard")
  python3 -c "
import sys
p, at = sys.argv[1], int(sys.argv[2]) // 2
with open(p, 'r+b') as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x5A]))" "$shard" "$size"
  # The job wants more steps than the damaged one holds, so the fallback has steps left to compare.
  since=$(date +%s.%N)
  mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np "$np" "$TESSEL" run "$job" "${sets[@]}" \
    --set job.output_dir="$w/damaged" --resume > "$w/damaged.log" 2>&1 || { cat "$w/damaged.log"; fail "$name: resume after damage failed"; }
  grep -q "step-$newest cannot be resumed: .*worker-1.h5: CRC-32" "$w/damaged.log" \
    || { cat "$w/damaged.log"; fail "$name: the damaged shard was not reported"; }
  grep -q "resuming from the older checkpoint" "$w/damaged.log" || fail "$name: the fallback was not reported"
  got=$(compare "$kind" "$w/uncut" "$w/damaged" "$since") || fail "$name: the resume after a damaged shard"
  pass "$name damaged shard refused, resumed from the previous checkpoint: $got"
}

# GPT: 2 pipeline stages, 40 steps, a checkpoint every 3.
gpt=(jobs/examples/gpt-demo.toml --set model.layers=2 --set model.hidden=64 --set model.heads=2 --set model.context=64
     --set train.batch_size=8 --set train.steps=40 --set train.warmup_steps=2 --set train.val_every=7
     --set train.val_batches=2 --set data.generated_bytes=65536 --set job.seed=5 --set resources.workers=2
     --set resources.threads_per_worker=1 --set pipeline.stages=2 --set pipeline.microbatches=2)
check_job gpt 3 "${gpt[@]:0:1}" llm 3 2 "${gpt[@]:1}"

# GPT: 2 data-parallel replicas of one stage, its first block offloading to the spill file.
gptdp=("${gpt[@]}" --set pipeline.stages=1 --set pipeline.data_parallel=2 --set 'spill.layer_policies=["offload","keep"]'
       --set spill.dir="\"$TESSEL_WORK/spill\"")
check_job gpt-dp2-offload 3 "${gptdp[@]:0:1}" llm 3 2 "${gptdp[@]:1}"

# RGCN: 2 workers on the generated graph, 30 epochs, a checkpoint every 2.
rgcn=(jobs/examples/rgcn-synthetic.toml --set data.graph="$TESSEL_WORK/graph.h5" --set train.epochs=30 --set job.seed=4)
"$TESSEL" run "${rgcn[@]}" --set train.epochs=1 --set job.output_dir="$TESSEL_WORK/warm" > /dev/null 2>&1
check_job rgcn 3 "${rgcn[@]:0:1}" rgnn 2 3 "${rgcn[@]:1}"

# RGCN in sampled mode: 2 workers, mini-batches of 128 nodes, fanouts 5 and 5.
sampled=("${rgcn[@]}" --set 'train.mode="sampled"' --set train.batch_size=128 --set 'train.fanouts=[5,5]')
check_job rgcn-sampled 3 "${sampled[@]:0:1}" rgnn 2 3 "${sampled[@]:1}"

# A checkpoint of another model shape (same workers): --resume refuses its settings before dispatch, and
# --resume-force, past that, is refused by the workers: exit 2 naming the shard.
expect_exit_within 120 2 env TESSEL="$TESSEL" scripts/tessel-mpirun -np 3 "${gpt[@]}" --set checkpoint.every_steps=3 \
  --set model.hidden=32 --set metrics.port_base=0 --set job.output_dir="$TESSEL_WORK/gpt/killed" --resume
grep -q "model.hidden = 64, this job has model.hidden = 32" "$TESSEL_WORK/stderr" "$TESSEL_WORK/stdout" \
  || { cat "$TESSEL_WORK/stderr"; fail "a resume with another model.hidden is not refused naming the key"; }
expect_exit_within 120 2 env TESSEL="$TESSEL" scripts/tessel-mpirun -np 3 "${gpt[@]}" --set checkpoint.every_steps=3 \
  --set model.hidden=32 --set metrics.port_base=0 --set job.output_dir="$TESSEL_WORK/gpt/killed" --resume-force
grep -q "does not fit this job" "$TESSEL_WORK/stderr" "$TESSEL_WORK/stdout" \
  || { cat "$TESSEL_WORK/stderr"; fail "a checkpoint of another shape is not named as such"; }
pass "a checkpoint that does not fit the job: exit 2 naming the shard"

# --resume without any checkpoint is a usage error naming the directory.
expect_exit 2 "$TESSEL" run jobs/examples/gpt-demo.toml --set job.output_dir="$TESSEL_WORK/none" --resume
expect_stderr "no checkpoint to resume in .*none/checkpoints"
pass "--resume without a checkpoint: exit 2 naming the directory"

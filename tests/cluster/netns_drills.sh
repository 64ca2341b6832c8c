#!/usr/bin/env bash
# Failure drills on the 3-host cluster (tests/cluster/netns/hosts.sh; TCP only; 4 ranks: the coordinator
# and worker 1 on tsl-h0, worker 2 on tsl-h1, worker 3 on tsl-h2), each through scripts/tessel-mpirun as a
# user runs a job, an RGCN job with a checkpoint every 5 epochs on the shared filesystem:
#   - worker 2 SIGKILLed mid-run;
#   - worker 3 stopped (SIGSTOP: alive, silent), caught by the heartbeat;
#   - tsl-h1's link cut (`ip link set down` on its veth) mid-run;
#   - the coordinator's host lost: every process on tsl-h0 SIGKILLed at once (the coordinator, worker 1
#     and Open MPI's daemon there);
#   - the coordinator's host frozen: every process on tsl-h0 SIGSTOPped (the workers must find it);
#   - a checkpoint shard corrupted on disk (the CRC-32 refuses it; the resume falls back a checkpoint).
# Each: the documented exit code (5), a message naming the rank and its host, detected within the
# heartbeat timeout plus a margin (the time is printed); then `--resume` on the 3 hosts continues to the
# same loss at every later epoch as an uninterrupted run.
# And a spill disk that fills up: a GPT pipeline over the 3 hosts offloading every block, tsl-h1's spill
# disk a 1 MB tmpfs: its stage falls back to recomputing as documented, the losses are keep's.
# Skipped (exit 77) where network namespaces cannot be made (not root).
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/netns/hosts.sh"
netns_up

heartbeat_timeout_s=5
# Detection: the coordinator (or, with the coordinator gone, the workers) checks every 20 ms at most; the
# rest is for a loaded 2-core machine. Exit: the report, MPI_Abort and mpirun's teardown, or
# tessel-mpirun's grace (3 s) where a host cannot be reached.
detect_limit_ms=$(( heartbeat_timeout_s * 1000 + 2000 ))
exit_limit_ms=$(( heartbeat_timeout_s * 1000 + 8000 ))
job=jobs/examples/rgcn-synthetic.toml
sets=(--set data.graph="$TESSEL_WORK/graph.h5" --set metrics.port_base=0 --set job.seed=11 --set resources.workers=3
      --set train.epochs=150 --set checkpoint.every_steps=5 --set checkpoint.keep=3
      --set "timeouts.heartbeat_timeout_seconds=$heartbeat_timeout_s" --set timeouts.heartbeat_interval_seconds=0.5)
export TESSEL
export TESSEL_MPIRUN_ARGS
TESSEL_MPIRUN_ARGS=$(netns_mpirun_flags 2 1 1)
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
secs() { printf '%d.%d' $(( $1 / 1000 )) $(( ($1 % 1000) / 100 )); }

rank_pid() {  # rank_pid RANK: that rank's tessel process (any host: the namespaces share the pid space)
  local p
  for p in $(pgrep -f "bin/tessel run $job"); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then echo "$p"; return; fi
  done
}

compare() {  # compare UNCUT RESUMED: every epoch's loss after the resume point is the uncut run's
  python3 - "$@" <<'PY'
import json, sys
a, b = (json.load(open(f"{d}/summary.json")) for d in sys.argv[1:3])
k = b.get("resumed_from_epoch")
assert k is not None, f"{sys.argv[2]}: not a resumed run"
la, lb = a["epoch_loss"], b["epoch_loss"]
assert 0 < k < len(la), f"resumed from epoch {k} of {len(la)}"
assert la == lb, "epoch losses differ: " + str([(e + 1, x, y) for e, (x, y) in enumerate(zip(la, lb)) if x != y][:3])
assert a["test_accuracy"] == b["test_accuracy"], (a["test_accuracy"], b["test_accuracy"])
assert set(b["rank_hosts"].values()) == {"tsl-h0", "tsl-h1", "tsl-h2"}, b["rank_hosts"]
print(f"resumed after epoch {k}: the {len(la) - k} later losses equal the uninterrupted run's")
PY
}

resume() {  # resume NAME: --resume on the 3 hosts, into the same output directory; it runs each later epoch once
  local out=$TESSEL_WORK/$1 since
  since=$(date +%s.%N)
  scripts/tessel-mpirun -np 4 "$job" "${sets[@]}" --set job.output_dir="$out" --resume > "$out.resume.log" 2>&1 ||
    { tail -20 "$out.resume.log"; fail "$1: the resume failed"; }
  ran_after "$out" "$since" $(($(json "$out/summary.json" 's["resumed_from_epoch"]') + 1)) \
    "$(json "$out/summary.json" 'len(s["epoch_loss"])')" >/dev/null
}

# drill NAME PATTERN ACTION: runs the job, does ACTION (a shell command) once a checkpoint exists, then
# times until PATTERN (a regex) is in the output (detected_ms) and until tessel-mpirun exits (exit_ms);
# sets rc. The output is $TESSEL_WORK/NAME.log.
drill() {
  local name=$1 pattern=$2 action=$3 out=$TESSEL_WORK/$1
  scripts/tessel-mpirun -np 4 "$job" "${sets[@]}" --set job.output_dir="$out" > "$out.log" 2>&1 </dev/null &
  local launcher=$!
  await_setup "$launcher" [ -f "$out/checkpoints/latest" ] || { kill -9 $launcher; cat "$out.log"; fail "$name: no checkpoint before the fault"; }
  local t0
  t0=$(now_ms)
  eval "$action"
  detected_ms=
  while kill -0 "$launcher" 2>/dev/null && [ $(( $(now_ms) - t0 )) -le $(( exit_limit_ms + 5000 )) ]; do
    [ -z "$detected_ms" ] && grep -Eq "$pattern" "$out.log" && detected_ms=$(( $(now_ms) - t0 ))
    sleep 0.05
  done
  kill -0 "$launcher" 2>/dev/null && { kill -9 "$launcher"; tail -20 "$out.log"; fail "$name: the job still runs $(secs $(( $(now_ms) - t0 ))) s after the fault"; }
  exit_ms=$(( $(now_ms) - t0 ))
  [ -z "$detected_ms" ] && grep -Eq "$pattern" "$out.log" && detected_ms=$exit_ms
  set +e
  wait "$launcher"
  rc=$?
  set -e
  # A failed run writes summary.json too ("outcome": "failed"); one that says "done" ran out before the fault.
  if [ -f "$out/summary.json" ] && ! grep -q '"outcome": "failed"' "$out/summary.json"; then
    fail "$name: the job finished before the fault: make it longer"
  fi
  [ "$rc" -eq 5 ] || { tail -20 "$out.log"; fail "$name: exit $rc, expected 5"; }
  [ -n "$detected_ms" ] || { tail -20 "$out.log"; fail "$name: no message matching /$pattern/"; }
  [ "$detected_ms" -le "$detect_limit_ms" ] ||
    fail "$name: detected $(secs "$detected_ms") s after the fault (limit: heartbeat timeout $heartbeat_timeout_s s + 2 s)"
  [ "$exit_ms" -le "$exit_limit_ms" ] || fail "$name: exit $(secs "$exit_ms") s after the fault (limit $(secs "$exit_limit_ms") s)"
}

scripts/tessel-mpirun -np 4 "$job" "${sets[@]}" --set job.output_dir="$TESSEL_WORK/uncut" > "$TESSEL_WORK/uncut.log" 2>&1 ||
  { tail -20 "$TESSEL_WORK/uncut.log"; fail "the uninterrupted run failed"; }
results=()

drill kill "rank 2 \(worker on tsl-h1, pid [0-9]+\) sent no heartbeat .*last step [0-9]+" 'kill -9 $(rank_pid 2)'
resume kill
results+=("worker 2 on tsl-h1 SIGKILLed: exit 5, detected in $(secs "$detected_ms") s, job ended in $(secs "$exit_ms") s; $(compare "$TESSEL_WORK/uncut" "$TESSEL_WORK/kill")")
pass "${results[-1]}"

drill stop "rank 3 \(worker on tsl-h2, pid [0-9]+\) sent no heartbeat .*last step [0-9]+" 'stopped=$(rank_pid 3); kill -STOP $stopped'
kill -9 "$stopped" 2>/dev/null || true
grep -v "^\s*$" "$TESSEL_WORK/stop.log" | tail -n 1 | grep -q "^tessel: error: rank 3 (worker on tsl-h2" ||
  { tail -5 "$TESSEL_WORK/stop.log"; fail "stop: Tessel's message is not the last line"; }
resume stop
results+=("worker 3 on tsl-h2 SIGSTOPped: exit 5, detected in $(secs "$detected_ms") s, job ended in $(secs "$exit_ms") s; $(compare "$TESSEL_WORK/uncut" "$TESSEL_WORK/stop")")
pass "${results[-1]}"

drill link "rank 2 \(worker on tsl-h1, pid [0-9]+\) sent no heartbeat .*last step [0-9]+" 'netns_link 1 down'
netns_link 1 up
# The rank cut off on tsl-h1 hears no coordinator and ends itself; Open MPI's daemon there may linger.
ip netns pids tsl-h1 | xargs -r kill -9 2>/dev/null || true
resume link
results+=("tsl-h1's link cut: exit 5, detected in $(secs "$detected_ms") s, job ended in $(secs "$exit_ms") s; $(compare "$TESSEL_WORK/uncut" "$TESSEL_WORK/link")")
pass "${results[-1]}"

drill coordinator-host "rank [23]: the coordinator \(rank 0\) has sent nothing|the coordinator \(rank 0, on tsl-h0, pid [0-9]+\) (ended without an outcome|stopped beating)" \
  'ip netns pids tsl-h0 | xargs -r kill -9 2>/dev/null || true'  # a process may end between the two
grep -Eq "^tessel: error: the coordinator \(rank 0, on tsl-h0, pid [0-9]+\) (ended without an outcome|stopped beating)" "$TESSEL_WORK/coordinator-host.log" ||
  { tail -5 "$TESSEL_WORK/coordinator-host.log"; fail "coordinator-host: tessel-mpirun does not say the coordinator was lost"; }
resume coordinator-host
results+=("tsl-h0 lost (coordinator, worker 1, Open MPI's daemon SIGKILLed): exit 5, detected in $(secs "$detected_ms") s, job ended in $(secs "$exit_ms") s; $(compare "$TESSEL_WORK/uncut" "$TESSEL_WORK/coordinator-host")")
pass "${results[-1]}"

# The coordinator's host frozen: every process on tsl-h0 SIGSTOPped, Open MPI's daemon included, so
# mpirun hears of nothing and the workers on tsl-h1 and tsl-h2 must find the silence themselves (the
# drill above may take either path). Their heartbeats to the frozen coordinator wait no longer than its
# silence limit: a fixed 2 s wait held the verdict past tessel-mpirun's own (a silence of 6 to 8 s).
drill coordinator-frozen "rank [23]: the coordinator \(rank 0\) has sent nothing for [0-9.]+ s" \
  'ip netns pids tsl-h0 | xargs -r kill -STOP 2>/dev/null || true'
ip netns pids tsl-h0 | xargs -r kill -9 2>/dev/null || true
for _ in $(seq 1 100); do [ -z "$(ip netns pids tsl-h0)" ] && break; sleep 0.05; done  # gone before the resume
resume coordinator-frozen
results+=("tsl-h0 frozen (every process SIGSTOPped): exit 5, the workers said so in $(secs "$detected_ms") s, job ended in $(secs "$exit_ms") s; $(compare "$TESSEL_WORK/uncut" "$TESSEL_WORK/coordinator-frozen")")
pass "${results[-1]}"

# A shard of the newest checkpoint of a finished run, one byte flipped: the resume refuses it by its
# CRC-32, says so, and continues from the previous checkpoint (the job asks for more epochs than that).
cp -r "$TESSEL_WORK/uncut" "$TESSEL_WORK/corrupt"
rm "$TESSEL_WORK/corrupt/summary.json"
newest=$(cat "$TESSEL_WORK/corrupt/checkpoints/latest")
shard=$TESSEL_WORK/corrupt/checkpoints/$newest/worker-2.h5
python3 -c "
import os, sys
p = sys.argv[1]; at = os.path.getsize(p) // 2
with open(p, 'r+b') as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x5A]))" "$shard"
resume corrupt
grep -q "$newest cannot be resumed: .*worker-2.h5: CRC-32" "$TESSEL_WORK/corrupt.resume.log" ||
  { tail -20 "$TESSEL_WORK/corrupt.resume.log"; fail "corrupt: the damaged shard was not named"; }
grep -q "resuming from the older checkpoint" "$TESSEL_WORK/corrupt.resume.log" || fail "corrupt: the fallback was not reported"
results+=("worker 2's shard of $newest corrupted: refused by its CRC-32, named; $(compare "$TESSEL_WORK/uncut" "$TESSEL_WORK/corrupt")")
pass "${results[-1]}"

# A spill disk that fills up: GPT over 3 stages (one a host), every block offloading; tsl-h1's spill disk
# is 1 MB, too small for a single block's activations, so stage 2 falls back to recomputing.
gpt=(jobs/examples/gpt-demo.toml --set metrics.port_base=0 --set job.seed=3 --set resources.workers=3
     --set pipeline.stages=3 --set model.layers=3 --set train.steps=8 --set train.warmup_steps=2)
scripts/tessel-mpirun -np 4 "${gpt[@]}" --set job.output_dir="$TESSEL_WORK/gpt-keep" > "$TESSEL_WORK/gpt-keep.log" 2>&1 ||
  { tail -20 "$TESSEL_WORK/gpt-keep.log"; fail "the GPT keep run failed"; }
TESSEL_NETNS_SPILL_MB_tsl_h1=1 scripts/tessel-mpirun -np 4 "${gpt[@]}" --set spill.policy='"offload"' \
  --set spill.dir="\"$TESSEL_NETNS_SPILL\"" --set job.output_dir="$TESSEL_WORK/gpt-full" > "$TESSEL_WORK/gpt-full.log" 2>&1 ||
  { tail -20 "$TESSEL_WORK/gpt-full.log"; fail "offloading with a full spill disk on tsl-h1 failed"; }
grep -Eq "rank 2: .*the spill file is full" "$TESSEL_WORK/gpt-full.log" ||
  { grep -i spill "$TESSEL_WORK/gpt-full.log" | tail; fail "no fallback to recomputing logged by rank 2 (tsl-h1)"; }
python3 - "$TESSEL_WORK/gpt-keep" "$TESSEL_WORK/gpt-full" <<'PY'
import json, sys
a, b = (json.load(open(f"{d}/summary.json")) for d in sys.argv[1:3])
assert a["step_loss"] == b["step_loss"], (a["step_loss"], b["step_loss"])
assert b["rank_hosts"]["2"] == "tsl-h1", b["rank_hosts"]
PY
results+=("tsl-h1's spill disk full (1 MB) under offload: stage 2 fell back to recomputing, every loss keep's")
pass "${results[-1]}"

echo "== drills on 3 hosts (heartbeat timeout ${heartbeat_timeout_s} s)"
printf '  %s\n' "${results[@]}"

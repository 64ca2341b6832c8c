#!/usr/bin/env bash
# Stopping a run with a signal (README "Stopping a run"; issue 19): SIGTERM, SIGINT and SIGUSR1 stop the
# job after its current step with its state saved, exit 7, and `--resume` continues to the same losses as
# an uninterrupted run at every later step. Each case starts the job, waits until it has trained a few
# steps past its last regular checkpoint, sends the signal, and asserts:
# - exit 7 within 60 s of the signal, with "stopped by SIGNAME after step S" as tessel's last word;
# - a checkpoint of step S itself (not only the last regular one): `latest` names step-S;
# - summary.json with stopped_by and stopped_after_step = S, and the status file with exit_code 7;
# - `--resume` exits 0 and every step's loss (and the validation loss) equals the uninterrupted run's.
# Cases: embedded SIGTERM, embedded SIGINT, and a 2-stage pipeline under mpirun (3 ranks) stopped by a
# SIGTERM to scripts/tessel-mpirun, which passes it on as a SIGUSR1 to mpirun and so to every rank.
source "$(dirname "$0")/../lib.sh"

job=jobs/examples/gpt-demo.toml
# 60 steps, a checkpoint every 25, every step logged; metrics off.
sets=(--set train.steps=60 --set train.warmup_steps=5 --set train.log_every=1 --set checkpoint.every_steps=25
      --set metrics.port_base=0)

"$TESSEL" run "$job" "${sets[@]}" --set job.output_dir="\"$TESSEL_WORK/uncut\"" >"$TESSEL_WORK/uncut.log" 2>&1 ||
  { cat "$TESSEL_WORK/uncut.log"; fail "the uninterrupted run failed"; }

# stop_case NAME SIGNAL LAUNCHER...: LAUNCHER runs the job (its job.output_dir appended, and, for `tessel
# run`, --status-file: scripts/tessel-mpirun uses one of its own and exits with its code).
stop_case() {
  local name=$1 sig=$2; shift 2
  local dir=$TESSEL_WORK/$name status=""
  local extra=()
  if [ "$1" = "$TESSEL" ]; then status=$TESSEL_WORK/$name.status; extra=(--status-file "$status"); fi
  "$@" "$job" "${sets[@]}" --set job.output_dir="\"$dir\"" "${extra[@]}" >"$dir.log" 2>&1 </dev/null &
  local pid=$!
  # Past step 30: after the checkpoint of step 25, so that the stop's own checkpoint is a new one.
  for _ in $(seq 1 1200); do grep -q "step 3[0-9]/60" "$dir.log" 2>/dev/null && break; sleep 0.05; done
  grep -q "step 3[0-9]/60" "$dir.log" || { cat "$dir.log"; fail "$name: the job did not reach step 30"; }
  local t0
  t0=$(date +%s%N)
  kill -"$sig" "$pid"
  local rc=0
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    pkill -9 -P "$pid" 2>/dev/null || true; kill -9 "$pid" 2>/dev/null || true
    cat "$dir.log"; fail "$name: still running 60 s after SIG$sig"
  fi
  wait "$pid" || rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ "$rc" -eq 7 ] || { cat "$dir.log"; fail "$name: SIG$sig: exit $rc, expected 7"; }
  local stopped
  stopped=$(python3 - "$dir/summary.json" "$status" "$sig" <<'PY'
import json, sys
s, sig = json.load(open(sys.argv[1])), "SIG" + sys.argv[3]
st = json.load(open(sys.argv[2])) if sys.argv[2] else {"exit_code": 7}  # tessel-mpirun checked it: exit 7
assert s.get("stopped_by") in (sig, "SIGUSR1"), s.get("stopped_by")  # tessel-mpirun passes on SIGUSR1
step = s["stopped_after_step"]
assert 30 <= step < 60, step
assert len(s["step_loss"]) == step, (len(s["step_loss"]), step)
assert st["exit_code"] == 7, st
print(step)
PY
) || { cat "$dir.log"; fail "$name: summary.json or the status file is wrong"; }
  [ "$(cat "$dir/checkpoints/latest")" = "step-$stopped" ] ||
    fail "$name: latest is $(cat "$dir/checkpoints/latest"), not the stop's own checkpoint step-$stopped"
  grep -Eq "^tessel: stopped by SIG(TERM|INT|USR1) after step $stopped of 60; checkpoint in " "$dir.log" ||
    { tail -3 "$dir.log"; fail "$name: tessel does not say where it stopped"; }
  # Resume to the end: it runs the steps after the stop's, once each, and every loss equals the uninterrupted run's.
  local since
  since=$(date +%s.%N)
  "$@" "$job" "${sets[@]}" --set job.output_dir="\"$dir\"" --resume >"$dir.resume.log" 2>&1 </dev/null ||
    { cat "$dir.resume.log"; fail "$name: the resumed run failed"; }
  ran_after "$dir" "$since" $((stopped + 1)) 60 >/dev/null
  python3 - "$TESSEL_WORK/uncut/summary.json" "$dir/summary.json" "$stopped" <<'PY' || fail "$name: the resumed losses differ"
import json, sys
a, b, k = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert b["resumed_from_step"] == k, b.get("resumed_from_step")
assert a["step_loss"] == b["step_loss"], "step losses differ"
assert a["val_loss"] == b["val_loss"], (a["val_loss"], b["val_loss"])
PY
  pass "$name: SIG$sig -> exit 7 in $((ms / 1000)).$(( (ms % 1000) / 100 )) s, checkpoint of step $stopped, resumed to the uninterrupted run's losses"
}

stop_case embedded-term TERM "$TESSEL" run
stop_case embedded-int INT "$TESSEL" run
# Under mpirun: 2 pipeline stages, so that both workers must stop after the same step.
sets+=(--set resources.workers=2 --set pipeline.stages=2)
"$TESSEL_SOURCE_DIR/scripts/tessel-mpirun" -np 3 "$job" "${sets[@]}" --set job.output_dir="\"$TESSEL_WORK/uncut2\"" \
  >"$TESSEL_WORK/uncut2.log" 2>&1 || { cat "$TESSEL_WORK/uncut2.log"; fail "the uninterrupted 2-stage run failed"; }
mv "$TESSEL_WORK/uncut" "$TESSEL_WORK/uncut1" && mv "$TESSEL_WORK/uncut2" "$TESSEL_WORK/uncut"
stop_case mpirun-term TERM "$TESSEL_SOURCE_DIR/scripts/tessel-mpirun" -np 3

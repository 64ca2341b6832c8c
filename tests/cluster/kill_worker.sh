#!/usr/bin/env bash
# A worker killed with SIGKILL mid-run:
#  - under mpirun --enable-recovery the coordinator's heartbeat notices within the timeout, names the rank
#    and the step, and ends the job with MPI_Abort(5). Open MPI 4.1's mpirun then exits 0 (it ignores
#    exit codes under --enable-recovery), so scripts/tessel-mpirun returns the coordinator's code: 5;
#  - under plain mpirun Open MPI tears the job down itself (exit 137) and names the rank.
source "$(dirname "$0")/../lib.sh"
job=jobs/examples/rgcn-synthetic.toml
sets=(--set data.graph="$TESSEL_WORK/graph.h5" --set train.epochs=100000 --set metrics.port_base=0
      --set timeouts.heartbeat_timeout_seconds=5 --set timeouts.heartbeat_interval_seconds=0.5)
"$TESSEL" run "$job" "${sets[@]}" --set train.epochs=1 --set job.output_dir="$TESSEL_WORK/warm" >/dev/null 2>&1

descendants() {  # every process below $1
  local kid
  for kid in $(pgrep -P "$1"); do echo "$kid"; descendants "$kid"; done
}

rank_pid() {  # $1 = launcher pid, $2 = world rank: that rank's process among the launcher's descendants
  local p
  for p in $(descendants "$1"); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo "$p"; return; fi
  done
}

run_and_kill() {  # $@ = launcher; sets rc, elapsed; log in $TESSEL_WORK/log
  local log=$TESSEL_WORK/log
  "$@" "$job" "${sets[@]}" --set job.output_dir="$TESSEL_WORK/run" >"$log" 2>&1 </dev/null &
  local launcher=$!
  for _ in $(seq 1 600); do grep -q "epoch 1/" "$log" && break; sleep 0.1; done
  if ! grep -q "epoch 1/" "$log"; then
    cat "$log"; kill -9 $(descendants $launcher) $launcher 2>/dev/null; fail "the job never reached epoch 1"
  fi
  sleep 1
  local victim
  victim=$(rank_pid "$launcher" 2)
  [ -n "$victim" ] || { kill -9 $(descendants $launcher) $launcher 2>/dev/null; fail "cannot find world rank 2"; }
  local t0=$SECONDS
  kill -9 "$victim"
  # Never wait unboundedly: a launcher still alive 60 s after the kill is a failure of its own.
  for _ in $(seq 1 600); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$launcher" 2>/dev/null; then
    kill -9 $(descendants $launcher) $launcher 2>/dev/null
    tail -5 "$log"; fail "the job was still running 60 s after rank 2 was killed"
  fi
  set +e
  wait "$launcher"
  rc=$?
  set -e
  elapsed=$((SECONDS - t0))
}

run_and_kill env TESSEL="$TESSEL" scripts/tessel-mpirun -np 3
cat "$TESSEL_WORK/log" | grep -v "^\s*$" | tail -n 12
[ "$rc" -eq 5 ] || fail "with --enable-recovery tessel-mpirun exited $rc, expected 5"
[ "$elapsed" -le 30 ] || fail "detection took ${elapsed}s (> 30 s)"
grep -Eq "rank 2 .*no heartbeat.*last step [0-9]+" "$TESSEL_WORK/log" || fail "the message does not name rank 2 and its step"
pass "--enable-recovery: exit 5 after ${elapsed}s, rank and step named"

run_and_kill mpirun "${MPIRUN_FLAGS[@]}" -np 3 "$TESSEL" run
cat "$TESSEL_WORK/log" | grep -v "^\s*$" | tail -n 6
[ "$rc" -eq 137 ] || fail "under plain mpirun the exit was $rc, expected 137"
grep -Eqi "rank 2" "$TESSEL_WORK/log" || fail "Open MPI's message does not name rank 2"
pass "plain mpirun: exit 137, Open MPI names rank 2"

#!/usr/bin/env bash
# A worker killed with SIGKILL mid-run (and, last, the coordinator: mid-run and while it plans):
#  - under mpirun --enable-recovery the coordinator's heartbeat notices within the timeout, names the rank
#    and the step, and ends the job with MPI_Abort(5). Open MPI 4.1's mpirun then exits 0 (it ignores
#    exit codes under --enable-recovery), so scripts/tessel-mpirun returns the coordinator's code: 5;
#  - under plain mpirun Open MPI tears the job down itself (exit 137) and names the rank.
# Both are timed from the kill: the coordinator must report the dead rank within the heartbeat timeout plus
# $report_margin_ms, and the whole job must be gone within the timeout plus $exit_margin_ms (the report, the
# shutdown messages, MPI_Abort and mpirun's teardown); Open MPI's own teardown must be faster still.
source "$(dirname "$0")/../lib.sh"
job=jobs/examples/rgcn-synthetic.toml
heartbeat_timeout_s=5
heartbeat_interval_s=0.5
sets=(--set data.graph="$TESSEL_WORK/graph.h5" --set train.epochs=100000 --set metrics.port_base=0
      --set "timeouts.heartbeat_timeout_seconds=$heartbeat_timeout_s"
      --set "timeouts.heartbeat_interval_seconds=$heartbeat_interval_s")
# The coordinator checks every 20 ms at most; the rest of the margin is for a loaded 2-core machine.
report_margin_ms=1500
exit_margin_ms=5000
report_limit_ms=$(( heartbeat_timeout_s * 1000 + report_margin_ms ))
exit_limit_ms=$(( heartbeat_timeout_s * 1000 + exit_margin_ms ))
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
secs() { printf '%d.%d' $(( $1 / 1000 )) $(( ($1 % 1000) / 100 )); }  # milliseconds -> "S.d"
"$TESSEL" run "$job" "${sets[@]}" --set train.epochs=1 --set job.output_dir="$TESSEL_WORK/warm" >/dev/null 2>&1


run_and_kill() {  # $@ = launcher; kills world rank $victim_rank (default 2); sets rc, elapsed_ms (kill to
                  # exit), report_ms (kill to the "$report_pattern" line, or empty); log in $TESSEL_WORK/log
  local log=$TESSEL_WORK/log
  # A run directory of its own each time: a failed run's directory holds its summary.json, and a run into
  # it is refused (the run-directory claim).
  runs=$(( ${runs:-0} + 1 ))
  "$@" "$job" "${sets[@]}" --set job.output_dir="$TESSEL_WORK/run-$runs" >"$log" 2>&1 </dev/null &
  local launcher=$!
  if ! await_setup "$launcher" grep -q "epoch 1/" "$log"; then
    cat "$log"; kill -9 $(descendants $launcher) $launcher 2>/dev/null; fail "the job never reached epoch 1"
  fi
  sleep 1
  local victim
  victim=$(rank_pid "$launcher" "$victim_rank")
  [ -n "$victim" ] || { kill -9 $(descendants $launcher) $launcher 2>/dev/null; fail "cannot find world rank $victim_rank"; }
  local t0
  t0=$(now_ms)
  kill -"${kill_signal:-9}" "$victim"
  # Wait no longer than the exit limit: a launcher still alive then has failed the test already.
  report_ms=
  while kill -0 "$launcher" 2>/dev/null && [ $(( $(now_ms) - t0 )) -le "$exit_limit_ms" ]; do
    [ -z "$report_ms" ] && grep -q "$report_pattern" "$log" && report_ms=$(( $(now_ms) - t0 ))
    sleep 0.05
  done
  if kill -0 "$launcher" 2>/dev/null; then
    kill -9 $(descendants $launcher) $launcher 2>/dev/null
    tail -5 "$log"; fail "the job was still running $(secs "$exit_limit_ms") s after rank $victim_rank was killed (heartbeat timeout ${heartbeat_timeout_s} s)"
  fi
  elapsed_ms=$(( $(now_ms) - t0 ))
  [ -z "$report_ms" ] && grep -q "$report_pattern" "$log" && report_ms=$elapsed_ms
  set +e
  wait "$launcher"
  rc=$?
  set -e
  kill -9 "$victim" 2>/dev/null || true  # a stopped one, should Open MPI have left it
}

victim_rank=2
report_pattern="no heartbeat"
run_and_kill env TESSEL="$TESSEL" scripts/tessel-mpirun -np 3
cat "$TESSEL_WORK/log" | grep -v "^\s*$" | tail -n 12
[ "$rc" -eq 5 ] || fail "with --enable-recovery tessel-mpirun exited $rc, expected 5"
grep -Eq "rank 2 .*no heartbeat.*last step [0-9]+" "$TESSEL_WORK/log" || fail "the message does not name rank 2 and its step"
[ "$report_ms" -le "$report_limit_ms" ] ||
  fail "the coordinator reported rank 2 $(secs "$report_ms") s after the kill (limit: heartbeat timeout ${heartbeat_timeout_s} s + $(secs "$report_margin_ms") s)"
[ "$elapsed_ms" -le "$exit_limit_ms" ] ||
  fail "the job exited $(secs "$elapsed_ms") s after the kill (limit: heartbeat timeout ${heartbeat_timeout_s} s + $(secs "$exit_margin_ms") s)"
pass "--enable-recovery: rank 2 and its step reported $(secs "$report_ms") s after the kill, exit 5 after $(secs "$elapsed_ms") s (heartbeat timeout ${heartbeat_timeout_s} s)"

# A worker that stops responding (SIGSTOP: alive, silent) is caught by the heartbeat as well, and every
# other rank learns of the abort at once (the coordinator's kTagAbort, taken by each worker's heartbeat
# thread while its training thread waits in a collective with the stopped rank): the job ends within the
# same limit as a killed worker's (without the abort message the others would wait in the collective until
# timeouts.step_seconds), with Tessel's message last (tessel-mpirun repeats it after Open MPI's banner). It
# had 2 s of margin of its own, which a loaded machine passed (7.0 s) with nothing wrong.
kill_signal=STOP
run_and_kill env TESSEL="$TESSEL" scripts/tessel-mpirun -np 3
kill_signal=9
[ "$rc" -eq 5 ] || { tail -5 "$TESSEL_WORK/log"; fail "a stopped worker: tessel-mpirun exited $rc, expected 5"; }
grep -v "^\s*$" "$TESSEL_WORK/log" | tail -n 1 | grep -Eq "^tessel: error: rank 2 \(worker on .*\) sent no heartbeat" ||
  { tail -5 "$TESSEL_WORK/log"; fail "a stopped worker: Tessel's message naming rank 2 is not the last line"; }
[ "$elapsed_ms" -le "$exit_limit_ms" ] ||
  fail "a stopped worker: the job exited $(secs "$elapsed_ms") s after the SIGSTOP (limit: heartbeat timeout ${heartbeat_timeout_s} s + $(secs "$exit_margin_ms") s)"
pass "SIGSTOPped rank 2 reported $(secs "$report_ms") s after the stop, exit 5 after $(secs "$elapsed_ms") s (heartbeat timeout ${heartbeat_timeout_s} s), Tessel's message last"

run_and_kill mpirun "${MPIRUN_FLAGS[@]}" -np 3 "$TESSEL" run
cat "$TESSEL_WORK/log" | grep -v "^\s*$" | tail -n 6
[ "$rc" -eq 137 ] || fail "under plain mpirun the exit was $rc, expected 137"
# Open MPI's own message, not any line with "rank 2" in it: Tessel's log lines start with "rank N:".
grep -Eq "mpirun noticed that process rank 2 with PID [0-9]+ on node .* exited on signal 9" "$TESSEL_WORK/log" ||
  fail "no message from Open MPI that process rank 2 exited on signal 9"
# Open MPI sees the death at once (no heartbeat involved): allow only the margin.
[ "$elapsed_ms" -le "$exit_margin_ms" ] || fail "plain mpirun took $(secs "$elapsed_ms") s to end the job (limit $(secs "$exit_margin_ms") s)"
pass "plain mpirun: exit 137 after $(secs "$elapsed_ms") s, Open MPI names rank 2"

# The coordinator killed with SIGKILL (out of memory, say): under --enable-recovery nothing else ends the
# workers. Each hears the coordinator's beats every heartbeat interval, presumes it dead after the
# heartbeat timeout of silence, says so and exits 5; tessel-mpirun finds no status and returns 5.
victim_rank=0
report_pattern="the coordinator (rank 0) has sent nothing"
run_and_kill env TESSEL="$TESSEL" scripts/tessel-mpirun -np 3
cat "$TESSEL_WORK/log" | grep -v "^\s*$" | tail -n 6
[ "$rc" -eq 5 ] || fail "with the coordinator killed tessel-mpirun exited $rc, expected 5"
for r in 1 2; do
  grep -Eq "rank $r: the coordinator \(rank 0\) has sent nothing for [0-9.]+ s .*presumed dead" "$TESSEL_WORK/log" \
    || fail "rank $r did not say that the coordinator is presumed dead"
done
[ "$report_ms" -le "$report_limit_ms" ] ||
  fail "the workers reported the coordinator $(secs "$report_ms") s after the kill (limit: heartbeat timeout ${heartbeat_timeout_s} s + $(secs "$report_margin_ms") s)"
[ "$elapsed_ms" -le "$exit_limit_ms" ] ||
  fail "the job exited $(secs "$elapsed_ms") s after the coordinator was killed (limit: heartbeat timeout ${heartbeat_timeout_s} s + $(secs "$exit_margin_ms") s)"
pass "coordinator killed: both workers said so $(secs "$report_ms") s after the kill and the job ended with exit 5 after $(secs "$elapsed_ms") s (heartbeat timeout ${heartbeat_timeout_s} s)"

# The coordinator stopped (SIGSTOP: alive, silent; a hung coordinator, or its host frozen): the workers
# presume it dead as above and exit 5, but mpirun waits for the stopped rank 0 for ever. tessel-mpirun
# watches the coordinator's beats in the status file too: after the heartbeat timeout plus an interval
# plus 0.25 s of silence it stops mpirun (which kills rank 0) and exits 5, naming the coordinator's host and pid.
kill_signal=STOP
run_and_kill env TESSEL="$TESSEL" scripts/tessel-mpirun -np 3
kill_signal=9
[ "$rc" -eq 5 ] || { tail -5 "$TESSEL_WORK/log"; fail "a stopped coordinator: tessel-mpirun exited $rc, expected 5"; }
grep -Eq "tessel-mpirun: the coordinator has not beaten for [0-9.]+ s \(heartbeat timeout $heartbeat_timeout_s(\.0)? s\): presumed lost" "$TESSEL_WORK/log" ||
  { tail -8 "$TESSEL_WORK/log"; fail "a stopped coordinator: tessel-mpirun did not say it stopped beating"; }
grep -Eq "^tessel: error: the coordinator \(rank 0, on .*, pid [0-9]+\) stopped beating for [0-9.]+ s" "$TESSEL_WORK/log" ||
  { tail -8 "$TESSEL_WORK/log"; fail "a stopped coordinator: no message naming its host and pid"; }
pass "coordinator stopped: the workers said so $(secs "$report_ms") s after the stop, and tessel-mpirun ended the job (exit 5) after $(secs "$elapsed_ms") s"

# The coordinator killed while it plans (before any assignment): the workers, waiting for theirs, hear
# its beats stop and exit 5 the same way. A large model makes the planner's calibration last seconds.
log=$TESSEL_WORK/plan-kill.log
env TESSEL="$TESSEL" scripts/tessel-mpirun -np 2 jobs/examples/gpt-demo.toml --set model.layers=12 --set model.hidden=768 \
  --set model.heads=12 --set train.batch_size=32 --set metrics.port_base=0 --set "timeouts.heartbeat_timeout_seconds=$heartbeat_timeout_s" \
  --set "timeouts.heartbeat_interval_seconds=$heartbeat_interval_s" --set job.output_dir="$TESSEL_WORK/plan-kill" \
  >"$log" 2>&1 </dev/null &
launcher=$!
await_setup "$launcher" grep -q "tokens:" "$log" || true
coordinator=$(rank_pid "$launcher" 0)
[ -n "$coordinator" ] || { kill -9 $(descendants $launcher) $launcher 2>/dev/null; cat "$log"; fail "cannot find the coordinator"; }
t0=$(now_ms)
kill -9 "$coordinator"
while kill -0 "$launcher" 2>/dev/null && [ $(( $(now_ms) - t0 )) -le "$exit_limit_ms" ]; do sleep 0.05; done
if kill -0 "$launcher" 2>/dev/null; then
  kill -9 $(descendants $launcher) $launcher 2>/dev/null
  tail -5 "$log"; fail "the worker still ran $(secs "$exit_limit_ms") s after the coordinator was killed while planning"
fi
elapsed_ms=$(( $(now_ms) - t0 ))
set +e; wait "$launcher"; rc=$?; set -e
grep -q "dispatched" "$log" && fail "the coordinator had dispatched before the kill: make the plan longer"
[ "$rc" -eq 5 ] || { cat "$log"; fail "with the coordinator killed while planning tessel-mpirun exited $rc, expected 5"; }
grep -Eq "rank 1: the coordinator \(rank 0\) has sent nothing for [0-9.]+ s .*presumed dead" "$log" \
  || { cat "$log"; fail "the waiting worker did not say that the coordinator is presumed dead"; }
pass "coordinator killed while planning: the waiting worker said so and the job ended with exit 5 after $(secs "$elapsed_ms") s"

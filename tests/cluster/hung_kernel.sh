#!/usr/bin/env bash
# A kernel that stops making progress is an error within timeouts.step_seconds, never a silent hang: exit 5,
# naming the rank, the step and the kernel, with summary.json and the status file written and every
# finished step kept.
#  - embedded (one process): the coordinator's StepWatchdog (orchestrator/liveness.h) watches the
#    training thread;
#  - under scripts/tessel-mpirun: the worker's heartbeats carry what its compute is doing
#    (core/activity.h), and the coordinator's step watchdog names it.
# The kernel: libbroken_example_hang.so, whose nn.relu.fwd on the CPU never returns from its third call on,
# preferred over the built-in one. (On a GPU the same report names the stream wait that never returns and
# the last kernel queued before it; that path runs only on a GPU.)
source "$(dirname "$0")/../lib.sh"
plugins=${TESSEL_TEST_PLUGINS:?set by CTest: the folder of the test plugins}
builtin=$(cd "$(dirname "$TESSEL")/../plugins" && pwd)
job=jobs/examples/rgcn-synthetic.toml
step_seconds=3
paths="[\"$builtin/libtessel_nn.so\", \"$builtin/libtessel_rgnn.so\", \"$builtin/libtessel_gather.so\", \"$plugins/libbroken_example_hang.so\"]"
sets=(--set data.graph="$TESSEL_WORK/graph.h5" --set metrics.port_base=0 --set train.epochs=20
      --set "plugins.paths=$paths" --set 'plugins.prefer=["broken_example"]'
      --set "timeouts.step_seconds=$step_seconds" --set timeouts.heartbeat_interval_seconds=0.5
      --set timeouts.heartbeat_timeout_seconds=5)
# The synthetic graph, made once (a run with the built-in plugins).
"$TESSEL" run "$job" --set data.graph="$TESSEL_WORK/graph.h5" --set metrics.port_base=0 --set train.epochs=1 \
  --set job.output_dir="$TESSEL_WORK/warm" >/dev/null 2>&1
# A step finishes in well under a second here: the step limit plus the loading and a loaded 2-core machine.
limit=$(( step_seconds + 20 ))

check_run() {  # $1 = run directory: what was trained before the hang is reported, not lost
  local summary=$1/summary.json
  [ -f "$summary" ] || fail "$1: no summary.json for the failed run"
  [ "$(json "$summary" 's["outcome"]')" = failed ] || fail "$summary: outcome is not \"failed\""
  [ "$(json "$summary" 's["exit_code"]')" = 5 ] || fail "$summary: exit_code is not 5"
  [ "$(json "$summary" 's["epochs_done"] >= 1')" = True ] || fail "$summary: no finished epoch kept"
  json "$summary" 's["error"]' | grep -q "nn.relu.fwd" || fail "$summary: the error does not name the kernel"
}

expect_exit_within "$limit" 5 "$TESSEL" run "$job" "${sets[@]}" --set job.output_dir="$TESSEL_WORK/embedded" \
  --status-file "$TESSEL_WORK/embedded.status"
expect_stderr "tessel: error: rank 0 \(embedded, on [^,]+, pid [0-9]+\) has not finished step [2-9][0-9]* within $step_seconds s \(timeouts\.step_seconds\); its compute: in kernel nn\.relu\.fwd \(cpu\) for [0-9.]+ s: presumed hung"
check_run "$TESSEL_WORK/embedded"
grep -q '"exit_code": *5' "$TESSEL_WORK/embedded.status" || fail "the status file has no exit code 5"
pass "embedded: exit 5 after ${elapsed}s, naming rank 0, the step and nn.relu.fwd (cpu); summary.json and the status file written"

expect_exit_within "$(( limit + 10 ))" 5 env TESSEL="$TESSEL" scripts/tessel-mpirun -np 2 "$job" "${sets[@]}" \
  --set job.output_dir="$TESSEL_WORK/mpirun"
expect_stderr "tessel: error: rank 1 \(worker on [^,]+, pid [0-9]+\) is alive but has not finished step [2-9][0-9]* within $step_seconds s \(timeouts\.step_seconds\); its compute: in kernel nn\.relu\.fwd \(cpu\) for [0-9.]+ s: presumed hung"
check_run "$TESSEL_WORK/mpirun"
pass "tessel-mpirun -np 2: exit 5 after ${elapsed}s, naming rank 1, the step and nn.relu.fwd (cpu) from its heartbeats"

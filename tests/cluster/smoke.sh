#!/usr/bin/env bash
# Smoke test for a new allocation: the generated demo graph trains under mpirun with 2 workers and
# reaches well above chance, and `tessel smoke` passes on 3 ranks. Run it by hand on a cluster:
# tests/cluster/smoke.sh (after building). Speed is not judged here (the suite shares 2 cores): the
# limits are wide, and a check that fails is tested in netns.sh.
source "$(dirname "$0")/../lib.sh"
mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np 3 "$TESSEL" run jobs/examples/rgcn-synthetic.toml \
  --set data.graph="$TESSEL_WORK/graph.h5" --set metrics.port_base=0 --set job.output_dir="$TESSEL_WORK/run"
acc=$(json "$TESSEL_WORK/run/summary.json" 's["test_accuracy"]')
classes=$(json "$TESSEL_WORK/run/summary.json" 's["graph"]["classes"]')
python3 -c "import sys; sys.exit(0 if float('$acc') > 2.0 / $classes else 1)" || fail "test accuracy $acc is not well above chance"
pass "2 workers, test accuracy $acc ($classes classes)"

# `tessel smoke` on this host: 3 ranks, every check PASS, its table printed; the spill directory a scratch one.
mpirun "${MPIRUN_FLAGS[@]}" -np 3 "$TESSEL" smoke --spill-dir "$TESSEL_WORK/spill" --min-spill-free-mb 64 \
  --min-spill-mbs 1 --max-latency-us 1e5 --min-bandwidth-mbs 1 --max-allreduce-ms 1e4 \
  --json "$TESSEL_WORK/smoke.json" > "$TESSEL_WORK/smoke.log" 2>&1 || { cat "$TESSEL_WORK/smoke.log"; fail "tessel smoke failed"; }
cat "$TESSEL_WORK/smoke.log"
[ "$(json "$TESSEL_WORK/smoke.json" 'len(s["ranks"])')" = 3 ] || fail "tessel smoke: not 3 rows in its JSON"
[ "$(json "$TESSEL_WORK/smoke.json" 'len(s["failures"])')" = 0 ] || fail "tessel smoke: failures in its JSON"
[ -z "$(ls -A "$TESSEL_WORK/spill")" ] || fail "tessel smoke left files in the spill directory: $(ls -A "$TESSEL_WORK/spill")"
pass "tessel smoke: 3 ranks pass"

# Bad input: exit 2 naming the cause.
expect_exit 2 "$TESSEL" smoke --set smoke.min_gpus=1
expect_stderr "--set needs a JOB file"
expect_exit 2 "$TESSEL" smoke "$TESSEL_WORK/missing.toml"
expect_stderr "cannot read job file .*missing.toml"
pass "tessel smoke: --set without a job and a missing job file are exit 2"

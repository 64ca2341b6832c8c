#!/usr/bin/env bash
# Smoke test for a new allocation: the generated demo graph trains under mpirun with 2 workers and
# reaches well above chance. Run it by hand on a cluster: tests/cluster/smoke.sh (after building).
source "$(dirname "$0")/../lib.sh"
mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np 3 "$TESSEL" run jobs/examples/rgcn-synthetic.toml \
  --set data.graph="$TESSEL_WORK/graph.h5" --set metrics.port_base=0 --set job.output_dir="$TESSEL_WORK/run"
acc=$(json "$TESSEL_WORK/run/summary.json" 's["test_accuracy"]')
classes=$(json "$TESSEL_WORK/run/summary.json" 's["graph"]["classes"]')
python3 -c "import sys; sys.exit(0 if float('$acc') > 2.0 / $classes else 1)" || fail "test accuracy $acc is not well above chance"
pass "2 workers, test accuracy $acc ($classes classes)"

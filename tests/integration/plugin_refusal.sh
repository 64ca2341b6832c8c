#!/usr/bin/env bash
# A job whose plugins are wrong fails before training with exit 4 and a message naming the plugin and
# the op, embedded and under mpirun (through scripts/tessel-mpirun, which returns the job's code).
# And promptly: a refused job is done in about 0.5 s embedded and 3-4 s under mpirun (every rank shut down),
# so each one must be done within $limit seconds; a job that lingers (e.g. a worker that waits out a 60 s
# timeout after it reported the error) fails the test.
source "$(dirname "$0")/../lib.sh"
limit=15
plugins=${TESSEL_TEST_PLUGINS:?set by CTest: the folder of the test plugins}
job=jobs/examples/rgcn-synthetic.toml
sets=(--set data.graph="$TESSEL_WORK/graph.h5" --set metrics.port_base=0 --set train.epochs=2)

expect_exit_within "$limit" 4 "$TESSEL" run "$job" "${sets[@]}" --set job.output_dir="$TESSEL_WORK/run1" \
  --set "plugins.paths=[\"$plugins/libtest_plugin_wrong_abi_major.so\"]"
expect_stderr "libtest_plugin_wrong_abi_major.so.*ABI"
pass "wrong ABI major: exit 4 naming the plugin, after ${elapsed}s"

expect_exit_within "$limit" 4 "$TESSEL" run "$job" "${sets[@]}" --set job.output_dir="$TESSEL_WORK/run2" \
  --set "plugins.paths=[\"$plugins/libtest_plugin_missing_ops.so\"]"
expect_stderr "op '?rgnn\.[a-z_.]+'? .*cpu"
pass "missing op: exit 4 naming the op, after ${elapsed}s"

expect_exit_within "$limit" 4 env TESSEL="$TESSEL" scripts/tessel-mpirun -np 3 "$job" "${sets[@]}" --set job.output_dir="$TESSEL_WORK/run3" \
  --set "plugins.paths=[\"$plugins/libtest_plugin_missing_ops.so\"]"
expect_stderr "rank [12] \(worker on [^)]*\) failed before training: .*rgnn\."
pass "missing op under mpirun: exit 4 from the worker's report, all ranks done after ${elapsed}s (limit ${limit}s)"

expect_exit_within "$limit" 4 "$TESSEL" plugin check "$plugins/libtest_plugin_wrong_abi_major.so"
pass "tessel plugin check: exit 4, after ${elapsed}s"

#!/usr/bin/env bash
# A job whose plugins are wrong fails before training with exit 4 and a message naming the plugin and
# the op, embedded and under mpirun (through scripts/tessel-mpirun, which returns the job's code). Also:
# plugin files that are not whole ELF shared objects, a plugin that crashes while it loads, two plugins
# offering one op (with and without [plugins] prefer), and a kernel that fails at run time.
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

# plugins.paths replaces the built-in plugins (jobs/README.md): with only this plugin named, the rgnn ops
# the built-in rgnn plugin would serve are missing.
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

# Each refusal of the loader, by `tessel run` and by `tessel plugin check`: exit 4, the file and the cause
# named. (An older host is played by a plugin that claims ABI 1.2.)
for case in "wrong_abi_major:ABI 2\.[0-9]+, host has 1\.1" "newer_abi_minor:ABI 1\.2, host has 1\.1 \(the host's minor is older" \
            "no_init:does not export the symbol 'tessel_plugin_init'" \
            "wrong_schema:op nn\.relu\.fwd \(cpu\): schema mismatch: the host expects"; do
  variant=${case%%:*} cause=${case#*:}
  expect_exit_within "$limit" 4 "$TESSEL" run "$job" "${sets[@]}" --set job.output_dir="$TESSEL_WORK/run-$variant" \
    --set "plugins.paths=[\"$plugins/libtest_plugin_$variant.so\"]"
  expect_stderr "libtest_plugin_$variant\.so.*$cause"
  expect_exit_within "$limit" 4 "$TESSEL" plugin check "$plugins/libtest_plugin_$variant.so"
  expect_stderr "libtest_plugin_$variant\.so.*$cause"
  pass "$variant: tessel run and tessel plugin check exit 4 naming the file and the cause"
done

# A kernel that computes a wrong value: the conformance run of `tessel plugin check` fails it, exit 4,
# naming the op and the element.
expect_exit_within 60 4 "$TESSEL" plugin check "$plugins/libbroken_example_wrong_value.so" --timing-runs 0
expect_stderr "libbroken_example_wrong_value\.so: 2 kernel check\(s\) failed the conformance run"
grep -Eq "^  nn\.relu\.fwd +cpu +f32 +FAIL" "$TESSEL_WORK/stdout" || fail "no FAIL row for nn.relu.fwd: $(cat "$TESSEL_WORK/stdout")"
grep -q "FAIL: wrong value: output 'Y'\[" "$TESSEL_WORK/stdout" || fail "the failure is not named"
pass "a wrong kernel: tessel plugin check exits 4 with its row failed, naming the wrong element"

# A plugin file, or its directory, that others may write is refused: anyone could swap the code.
open=$TESSEL_WORK/open && mkdir -p "$open" && chmod 700 "$open"
cp "$(dirname "$TESSEL")/../plugins/libtessel_nn.so" "$open/libtessel_nn.so"
chmod o+w "$open/libtessel_nn.so"
expect_exit_within "$limit" 4 "$TESSEL" plugin check "$open/libtessel_nn.so"
expect_stderr "libtessel_nn\.so.*writable"
chmod o-w "$open/libtessel_nn.so" && chmod o+w "$open"
expect_exit_within "$limit" 4 "$TESSEL" run "$job" "${sets[@]}" --set job.output_dir="$TESSEL_WORK/run-open" \
  --set "plugins.search_dirs=[\"$open\"]"
expect_stderr "$open.*writable"
chmod 700 "$open"
pass "a world-writable plugin file or directory: exit 4 naming the path"

# A plugin file that is not a whole ELF shared object is refused before dlopen (which would die of SIGBUS
# on a file cut short), by `tessel run` and by `tessel plugin check`: the first 3,000 bytes of a real
# plugin, and a text file. Both name the file and the cause; the run leaves nothing behind.
bad=$TESSEL_WORK/bad-plugins
rm -rf "$bad" && mkdir -p "$bad" && chmod 755 "$bad"
head -c 3000 "$(dirname "$TESSEL")/../plugins/libtessel_nn.so" >"$bad/libtessel_cut.so"
echo "not a plugin" >"$bad/libtessel_text.so"
for f in cut text; do
  cause=$([ "$f" = cut ] && echo "truncated or corrupt: program header [0-9]+ \(PT_LOAD segment\) ends at byte [0-9]+, the file has 3000" \
                         || echo "not an ELF file")
  expect_exit_within "$limit" 4 "$TESSEL" run "$job" "${sets[@]}" --set job.output_dir="$TESSEL_WORK/run-$f" \
    --set "plugins.paths=[\"$bad/libtessel_$f.so\"]"
  expect_stderr "refusing plugin $bad/libtessel_$f.so: $cause"
  [ ! -e "$TESSEL_WORK/run-$f/summary.json" ] || fail "a refused $f plugin left a run behind"
  expect_exit_within "$limit" 4 "$TESSEL" plugin check "$bad/libtessel_$f.so"
  expect_stderr "refusing plugin $bad/libtessel_$f.so: $cause"
  pass "a $f plugin file: tessel run and tessel plugin check exit 4 naming it and the cause"
done

# A plugin whose initialiser crashes (SIGSEGV in tessel_plugin_init): `tessel plugin check` loads it in a
# child process and turns the crash into a verdict, exit 4.
expect_exit_within "$limit" 4 "$TESSEL" plugin check "$plugins/libtest_plugin_init_crashes.so"
expect_stderr "libtest_plugin_init_crashes.so crashed the process that loaded it: it died of signal 11"
pass "a plugin that crashes while it loads: tessel plugin check exits 4 with a verdict, not a crash"

# Two plugins offer nn.relu.fwd for the CPU: the built-in nn and a test plugin whose kernel fails at its
# third call. Without [plugins] prefer the job stops before training, naming both.
builtin="$(cd "$(dirname "$TESSEL")/../plugins" && pwd)"
both=(--set "plugins.paths=[\"$plugins/libtest_plugin_fails_at_run.so\"]" --set "plugins.search_dirs=[\"$builtin\"]")
expect_exit_within "$limit" 4 "$TESSEL" run "$job" "${sets[@]}" --set job.output_dir="$TESSEL_WORK/run-both" "${both[@]}"
expect_stderr "op 'nn.relu.fwd' for device cpu is provided by both 'test_fails_at_run' \(.*libtest_plugin_fails_at_run.so\) and 'nn' \(.*libtessel_nn.so\): name the one to use first in \[plugins\] prefer"
pass "two plugins offer an op, no prefer: exit 4 before training, naming both"

# With prefer the test plugin serves it (the log says so), and its failure at run time stops the 3-rank
# job cleanly: exit 4, the rank, the epoch, the plugin and the op named, a summary.json that says why.
expect_exit_within 60 4 env TESSEL="$TESSEL" scripts/tessel-mpirun -np 3 "$job" "${sets[@]}" --set train.epochs=5 \
  --set job.output_dir="$TESSEL_WORK/run-prefer" "${both[@]}" --set 'plugins.prefer=["test_fails_at_run"]'
expect_stderr "op nn.relu.fwd \(cpu\): plugin test_fails_at_run \(plugins.prefer\), not nn"
expect_stderr "^tessel: error: rank [12] \(worker on [^)]*\) failed after epoch [0-9]+: plugin [^ ]*libtest_plugin_fails_at_run.so op nn.relu.fwd: the accelerator went away"
summary=$TESSEL_WORK/run-prefer/summary.json
[ -s "$summary" ] || fail "the failed run left no summary.json"
[ "$(json "$summary" 's["outcome"]')" = failed ] || fail "summary.json does not say the run failed"
json "$summary" 's["error"]' | grep -q "op nn.relu.fwd" || fail "summary.json's error does not name the op"
pass "prefer chose the test plugin; its run-time failure: exit 4 after ${elapsed}s naming rank, epoch, plugin and op"

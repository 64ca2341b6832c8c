#!/usr/bin/env bash
# Issue 32, row 5: a run directory was silently shared: two runs with one job.output_dir (at once, or one
# after the other) both exited 0, metrics.csv interleaved them, summary.json and the weights were whichever
# finished last; after a good run, a failed run into the same directory still let `tessel export llmc`
# export the earlier run's weights. Now a run claims its directory (RUN_DIR/.tessel-run.lock): a second run
# at once is refused (exit 2 naming the first's pid), a run into a directory holding an earlier run is
# refused unless --overwrite (which removes that run's files and nothing else), a dead run's lock is taken
# over with a warning, two default runs/NAME-STAMP directories started in the same second are two, and
# export refuses a run that did not finish.
source "$(dirname "$0")/../lib.sh"
w=$TESSEL_WORK
demo=jobs/examples/gpt-demo.toml
small=(--set model.layers=1 --set model.hidden=32 --set model.heads=2 --set model.context=32
       --set data.generated_bytes=16384 --set train.batch_size=4 --set train.warmup_steps=1 --set train.val_every=0
       --set train.val_batches=1 --set resources.threads_per_worker=1)

# --- one after the other: the second is refused, naming what is there; the first's files are unchanged
expect_exit 0 "$TESSEL" run "$demo" "${small[@]}" --set train.steps=4 --set job.output_dir="$w/one"
before=$(cd "$w/one" && md5sum summary.json metrics.csv weights/stage-0.bin)
expect_exit 2 "$TESSEL" run "$demo" "${small[@]}" --set train.steps=6 --set job.output_dir="$w/one"
expect_stderr "job.output_dir: .*/one holds an earlier run \(job.toml, metrics.csv, summary.json, weights\).*--overwrite"
[ "$before" = "$(cd "$w/one" && md5sum summary.json metrics.csv weights/stage-0.bin)" ] ||
  fail "a refused run changed the earlier run's files"
[ ! -e "$w/one/.tessel-run.lock" ] || fail "a finished run left its lock"
pass "a second run into a finished run's directory: exit 2 naming its files, which are unchanged"

# --- --overwrite never removes what a user put inside the run's own directories (weights/ here)
echo "keep me" > "$w/one/weights/my-export.txt"
expect_exit 2 "$TESSEL" run "$demo" "${small[@]}" --set train.steps=6 --set job.output_dir="$w/one" --overwrite
expect_stderr "--overwrite: .*/one/weights/my-export.txt is not a file Tessel writes there"
[ "$(cat "$w/one/weights/my-export.txt")" = "keep me" ] || fail "--overwrite removed a user's file in weights/"
rm "$w/one/weights/my-export.txt"
pass "--overwrite refuses a weights/ holding a user's file (exit 2 naming it)"

# --- --overwrite replaces the run's own entries and keeps a file the user put there
echo "my notes" > "$w/one/notes.txt"
expect_exit 0 "$TESSEL" run "$demo" "${small[@]}" --set train.steps=6 --set job.output_dir="$w/one" --overwrite
expect_stderr "--overwrite: removed the earlier run's job.toml, metrics.csv, summary.json, weights from"
[ "$(json "$w/one/summary.json" 'len(s["step_loss"])')" = 6 ] || fail "--overwrite: summary.json is not the new run's"
[ "$(grep -c '^0,' "$w/one/metrics.csv")" = 6 ] || fail "--overwrite: metrics.csv mixes runs: $(grep -c '^0,' "$w/one/metrics.csv") rows"
[ "$(cat "$w/one/notes.txt")" = "my notes" ] || fail "--overwrite removed a file it did not write"
pass "--overwrite: the new run's summary and metrics alone, the user's notes.txt kept"

# --- at once: the second is refused while the first trains, naming the first's pid and host
"$TESSEL" run "$demo" "${small[@]}" --set train.steps=100000 --set job.output_dir="$w/busy" >"$w/busy.log" 2>&1 &
first=$!
for _ in $(seq 1 300); do grep -q " step 1/" "$w/busy.log" && break; sleep 0.1; done
expect_exit 2 "$TESSEL" run "$demo" "${small[@]}" --set train.steps=4 --set job.output_dir="$w/busy" --overwrite
expect_stderr "job.output_dir: .*/busy is in use by another run \(pid $first on $(hostname)\)"
kill -9 "$first"; wait "$first" 2>/dev/null || true
pass "a second run at once (even with --overwrite): exit 2 naming the first's pid and host"

# --- the killed run's lock is stale: the next run takes it over, saying so
[ -e "$w/busy/.tessel-run.lock" ] || fail "a killed run left no lock (the test cannot check the takeover)"
expect_exit 0 "$TESSEL" run "$demo" "${small[@]}" --set train.steps=4 --set job.output_dir="$w/busy" --overwrite
expect_stderr "taking over .*busy/.tessel-run.lock: its run \(pid $first on .*\) is gone"
pass "a dead run's lock is taken over with a warning"

# --- default directories: two runs started at once get two directories
mkdir -p "$w/cwd" && cd "$w/cwd"
"$TESSEL" run "$TESSEL_SOURCE_DIR/$demo" "${small[@]}" --set train.steps=4 >"$w/a.log" 2>&1 &
a=$!
"$TESSEL" run "$TESSEL_SOURCE_DIR/$demo" "${small[@]}" --set train.steps=4 >"$w/b.log" 2>&1 &
b=$!
wait "$a" || fail "default run a failed: $(tail -3 "$w/a.log")"
wait "$b" || fail "default run b failed: $(tail -3 "$w/b.log")"
[ "$(ls -d runs/gpt-demo-* | wc -l)" = 2 ] || fail "two default runs share a directory: $(ls runs)"
cd "$TESSEL_SOURCE_DIR"
pass "two default runs at once: two directories ($(ls "$w/cwd/runs" | tr '\n' ' '))"

# --- export refuses a run that did not finish, even with an earlier run's weights beside it
cp -r "$w/one" "$w/failed"
python3 - "$w/failed/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s["outcome"] = "failed"; s["error"] = "rank 1: the loss is NaN"
json.dump(s, open(sys.argv[1], "w"))
PY
expect_exit 3 "$TESSEL" export llmc "$w/failed" "$w/failed.bin"
expect_stderr "the run did not finish \(it failed: rank 1: the loss is NaN\)"
[ ! -e "$w/failed.bin" ] || fail "export wrote a checkpoint of a failed run"
expect_exit 0 "$TESSEL" export llmc "$w/one" "$w/one.bin"
pass "export refuses a failed run's directory (exit 3), exports a finished one"

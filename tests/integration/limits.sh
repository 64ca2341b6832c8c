#!/usr/bin/env bash
# Limits before work (issue 32, rows 7, 8, 9, 11 and 12): what a job asks for beyond the machine, or a job
# file that is not a file, is refused at once with exit 2 (or 6 for memory) naming the key or the file; the
# time limit stops an embedded run after a step, checkpoint saved, exit 7; messages say what is wrong.
source "$(dirname "$0")/../lib.sh"
w=$TESSEL_WORK
demo=jobs/examples/gpt-demo.toml
quick=(--set train.steps=50 --set train.warmup_steps=0 --set train.val_every=0 --set metrics.port_base=0)

# --- row 8: a FIFO, a device and a directory are refused without being read (a FIFO used to block)
mkfifo "$w/job.fifo"
expect_exit_within 10 2 "$TESSEL" validate "$w/job.fifo"
expect_stderr "job file '$w/job.fifo' is a FIFO \(named pipe\), not a TOML file"
expect_exit_within 10 2 "$TESSEL" run /dev/zero
expect_stderr "job file '/dev/zero' is a character device"
expect_exit_within 10 2 "$TESSEL" validate "$w"
expect_stderr "is a directory, not a TOML file"
pass "a job file that is not a regular file"

# --- row 7: a thread count past the schema's cap, or past this host's cores, is exit 2 naming the key
expect_exit_within 30 2 "$TESSEL" run "$demo" --set resources.threads_per_worker=2147483647 --set job.output_dir="$w/t1"
expect_stderr "resources.threads_per_worker: must be 1 .. 1024, got 2147483647"
cores=$(nproc --all)
if [ "$cores" -lt 1024 ]; then
  expect_exit_within 60 2 "$TESSEL" run "$demo" "${quick[@]}" --set resources.threads_per_worker=1024 --set job.output_dir="$w/t2"
  expect_stderr "resources.threads_per_worker = 1024 but this process \(rank 0, embedded, on .*\) has $cores cores?: set it to at most $cores"
  grep -q mpirun "$w/stderr" && fail "an embedded run blames mpirun: $(cat "$w/stderr")"
  [ ! -e "$w/t2" ] || fail "a refused run left $w/t2 behind"
fi
pass "thread counts"

# --- row 9: the time limit stops an embedded run after its step, with a checkpoint, exit 7
expect_exit_within 120 7 "$TESSEL" run "$demo" "${quick[@]}" --set job.time_limit_seconds=0.001 \
  --set checkpoint.every_steps=1000 --set job.output_dir="$w/limit"
expect_stderr "stopped by the time limit \(job.time_limit_seconds = 0.001\) after step 1 of 50; checkpoint in "
[ "$(json "$w/limit/summary.json" 's["stopped_by"]')" = job.time_limit_seconds ] || fail "summary.json: no stopped_by"
[ -e "$w/limit/checkpoints/step-1/manifest.json" ] || fail "no checkpoint of step 1: $(ls -R "$w/limit")"
pass "job.time_limit_seconds, embedded"

# --- row 11: a budget the plan's shapes cannot fit is refused before the calibration; a model too large to
# calibrate is exit 6 naming the setting, not exit 1
expect_exit_within 10 2 "$TESSEL" plan "$demo" --set model.hidden=4096 --set resources.memory_budget_bytes=512MiB
expect_stderr "resources.memory_budget_bytes = 536870912 cannot hold 2 blocks of model.hidden = 4096"
expect_exit_within 30 6 "$TESSEL" plan "$demo" --set model.hidden=100000000
expect_stderr "out of memory: .*model.hidden = 100000000"
# A share larger than the host, without a budget: refused before the worker allocates (Linux would grant
# the memory and its OOM killer end the run with SIGKILL), embedded and on a worker rank, naming settings.
graph=jobs/examples/rgcn-synthetic.toml
huge=(--set model.hidden=100000000 --set train.epochs=1 --set metrics.port_base=0)
expect_exit_within 60 6 "$TESSEL" run "$graph" "${huge[@]}" --set job.output_dir="$w/huge"
expect_stderr "out of memory: this process \(rank 0, embedded, on .*\) would need about .* for its share .*sized by model.hidden = 100000000, model.layers = 2 and this worker's partition .*nothing was allocated"
[ ! -e "$w/huge" ] || fail "a refused run left $w/huge behind"
expect_exit_within 120 6 env TESSEL="$TESSEL" scripts/tessel-mpirun -np 3 "$graph" "${huge[@]}" --set resources.workers=2 --set job.output_dir="$w/huge2"
expect_stderr "worker [01] \(on .*\) would need about .* sized by model.hidden = 100000000"
expect_exit 0 "$TESSEL" plan "$graph" --set model.hidden=100000000
grep -q "on a CPU host like this one the run refuses it (exit 6)" "$w/stdout" || fail "tessel plan does not say: $(cat "$w/stdout")"
# The coordinator's own data too: a synthetic graph larger than the host is refused before it is generated.
expect_exit_within 60 6 "$TESSEL" run "$graph" --set data.synthetic.nodes=2000000000 --set data.graph="$w/huge.h5" \
  --set job.output_dir="$w/huge3"
expect_stderr "out of memory: generating graph 'synthetic' needs at least .* GB \(2e\+09 nodes with 32 float32 features"
# An allocation that fails all the same (here under ulimit -v) names its tensor and the settings.
expect_exit_within 60 6 bash -c "ulimit -v 3000000; exec \"\$0\" \"\$@\"" "$TESSEL" run "$graph" --set model.hidden=3000 \
  --set model.layers=3 --set train.epochs=1 --set metrics.port_base=0 --set resources.threads_per_worker=1 \
  --set job.output_dir="$w/ulimit"
expect_stderr "cpu tensor: out of memory: .*; worker 0's tensors are sized by model.hidden = 3000, model.layers = 3"
# A full-graph worker over the budget with its halo resident is told what a streamed halo would need.
expect_exit_within 60 2 "$TESSEL" plan "$graph" --set resources.workers=3 --set resources.memory_budget_bytes=7MiB
expect_stderr "worker 0 needs about .* \(7.3 MiB\); add workers or raise the budget, or set train.halo = \"streamed\" \(no halo rows kept; about 6.2 MiB\)"
expect_exit_within 60 2 "$TESSEL" plan "$graph" --set resources.workers=3 --set resources.memory_budget_bytes=5MiB \
  --set train.halo=streamed
grep -q "train.halo" "$w/stderr" && fail "a streamed halo over the budget is told to stream: $(cat "$w/stderr")"
pass "the memory budget before allocating"

# --- row 12: messages in the user's words
expect_exit 2 "$TESSEL" partition "$w/none.h5" --parts=0 --out "$w/parts"
expect_stderr "--parts: must be a whole number >= 1, got 0"
expect_exit 3 "$TESSEL" inspect "$w/none.h5"
expect_stderr "$w/none.h5: no such file"
"$TESSEL" run "$demo" "${quick[@]}" --set train.steps=2 --set train.lr=1e308 --set train.on_bad_loss=warn \
  --set job.output_dir="$w/lr" >/dev/null 2>"$w/stderr" || true
grep -q "lr 1e+308" "$w/stderr" || fail "the progress line does not show lr 1e+308: $(cat "$w/stderr")"
grep -Eq '[0-9]{30}' "$w/stderr" && fail "a number printed with 30 digits or more: $(cat "$w/stderr")"
long=$w/$(printf 'd%.0s' $(seq 1 200))
for _ in $(seq 1 19); do long=$long/$(printf 'd%.0s' $(seq 1 200)); done
expect_exit_within 10 2 "$TESSEL" validate "$demo" --set checkpoint.dir="$long"
expect_stderr "checkpoint.dir: the path is [0-9]+ characters \(absolute\); with the names Tessel writes in it"
mkdir -p "$w/failed-run"
printf '{"job": "gpt-demo", "kind": "llm", "outcome": "failed", "error": "rank 2 failed"}\n' > "$w/failed-run/summary.json"
expect_exit 3 "$TESSEL" export llmc "$w/failed-run" "$w/out.bin"
expect_stderr "the run did not finish \(it failed: rank 2 failed\): there are no weights of it to export"
pass "messages"

#!/usr/bin/env bash
# Issue 32, row 1: one HTTP request (curl http://RANK:PORT/, a HEAD, a POST) killed a training job with
# SIGSEGV in civetweb's error path. Now a training job is fuzzed over loopback while it trains: every kind
# of request of tests/integration/exporter_fuzz.py (valid scrapes, every method, unknown paths, malformed
# and oversized heads, random bytes, TLS and HTTP/2 prefaces, resets, slow clients, connection floods) for
# TESSEL_EXPORTER_FUZZ_SECONDS (default 15) s. The job must go on training, exit 0, and its losses must be
# bit-identical to an unscraped run's.
source "$(dirname "$0")/../lib.sh"
w=$TESSEL_WORK
seconds=${TESSEL_EXPORTER_FUZZ_SECONDS:-15}
job=jobs/examples/gpt-demo.toml
# Enough steps to outlast the fuzzing (about 45 ms a step on 2 cores while fuzzed); validation every 100
# steps keeps it cheap.
sets=(--set train.steps=800 --set train.val_every=100)

"$TESSEL" run "$job" "${sets[@]}" --set job.output_dir="$w/quiet" >"$w/quiet.log" 2>&1 ||
  { cat "$w/quiet.log"; fail "the unscraped run failed"; }

port=$(free_port_base 1) || fail "no free port"
"$TESSEL" run "$job" "${sets[@]}" --set job.output_dir="$w/fuzzed" --set metrics.port_base="$port" \
  >"$w/fuzzed.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do grep -q " step 1/" "$w/fuzzed.log" 2>/dev/null && break; sleep 0.1; done
set +e
python3 tests/integration/exporter_fuzz.py "$port" --seconds "$seconds" --pid "$pid" --json "$w/fuzz.json"
fuzz_rc=$?
set -e
if ! kill -0 "$pid" 2>/dev/null; then
  tail -5 "$w/fuzzed.log"
  grep -q "^summary: " "$w/fuzzed.log" && fail "the job finished before the fuzzing did: make train.steps larger"
  fail "the job died while it was fuzzed"
fi
[ "$fuzz_rc" -eq 0 ] || { kill -9 "$pid"; tail -20 "$w/fuzzed.log"; fail "the exporter broke a promise (above)"; }
set +e; wait "$pid"; rc=$?; set -e
[ "$rc" -eq 0 ] || { tail -20 "$w/fuzzed.log"; fail "the fuzzed job exited $rc"; }
python3 - "$w/quiet/summary.json" "$w/fuzzed/summary.json" <<'PY' || fail "the fuzzed run's losses differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["step_loss"] == b["step_loss"], "step_loss differs"
assert a["val_loss"] == b["val_loss"], "val_loss differs"
print(f"{len(a['step_loss'])} step losses and {len(a['val_loss'])} validation losses bit-identical to the unscraped run")
PY
pass "a job fuzzed over loopback for ${seconds} s trained on, exit 0, losses bit-identical"

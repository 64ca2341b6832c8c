#!/usr/bin/env bash
# Monitoring and failed runs: the exporter binds 127.0.0.1 by default and the targets file says so; a port
# in use and an unwritable targets file stop the job before training (exit 2 naming the rank and the port;
# exit 6 naming metrics.targets_file) with nothing left behind; a run that fails mid-training (an I/O error,
# a bad loss) leaves a summary.json that says why; train.on_bad_loss = "warn" trains on; every run writes
# metrics.csv.
source "$(dirname "$0")/../lib.sh"
w=$TESSEL_WORK
job=jobs/examples/rgcn-synthetic.toml
sets=(--set data.graph="$w/graph.h5" --set data.synthetic.nodes=2000)
port=$(free_port_base 3) || fail "no free ports"  # port .. port+2: one job's 3 ranks

# --- the default bind is 127.0.0.1, and the targets file lists that address
"$TESSEL" run "$job" "${sets[@]}" --set train.epochs=100000 --set metrics.port_base="$port" \
  --set job.output_dir="$w/bind" >"$w/bind.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do [ -s "$w/bind/targets.json" ] && grep -q "epoch 1/" "$w/bind.log" && break; sleep 0.1; done
python3 - "$port" "$w/bind/targets.json" <<'PY' || { kill -9 $pid; cat "$w/bind.log"; fail "the exporter does not listen on 127.0.0.1 alone"; }
import json, sys
port = int(sys.argv[1])
listening = []
for path in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        lines = open(path).read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        local, state = line.split()[1], line.split()[3]
        addr, p = local.split(":")
        if int(p, 16) == port and state == "0A":
            listening.append(addr)
assert listening == ["0100007F"], f"port {port} listens on {listening} (0100007F is 127.0.0.1)"
targets = json.load(open(sys.argv[2]))
assert targets[0]["targets"] == [f"127.0.0.1:{port}"], targets
print(f"port {port}: listening on 127.0.0.1 only; targets.json lists 127.0.0.1:{port}")
PY
kill -TERM $pid
set +e; wait $pid; rc=$?; set -e
[ "$rc" -eq 7 ] || fail "SIGTERM: expected exit 7, got $rc"
[ ! -e "$w/bind/targets.json" ] || fail "the job ended but left its targets file"
pass "default bind 127.0.0.1, targets file names it, removed at the end"

# --- a port in use: exit 2 before training, naming the rank and the port, nothing left behind
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(60)' "$((port + 2))" &
holder=$!
sleep 0.5
expect_exit 2 "$TESSEL" run "$job" "${sets[@]}" --set metrics.port_base="$((port + 2))" --set job.output_dir="$w/busy"
expect_stderr "rank 0 on .* cannot serve its metrics on port $((port + 2)): .*Address already in use"
[ ! -e "$w/busy" ] || fail "a job refused before training left $w/busy behind"
expect_exit 2 env TESSEL="$TESSEL" scripts/tessel-mpirun -np 3 "$job" "${sets[@]}" --set metrics.port_base="$port" \
  --set job.output_dir="$w/busy-mpi"
expect_stderr "rank 2 .*cannot serve its metrics on port $((port + 2)): .*Address already in use"
grep -q "epoch 1/" "$TESSEL_WORK/stderr" && fail "the job trained although rank 2 could not serve its metrics"
[ ! -e "$w/busy-mpi" ] || fail "a job refused before training left $w/busy-mpi behind"
kill $holder 2>/dev/null || true
pass "a metrics port in use: exit 2 before training, naming the rank and the port (embedded and rank 2 of 3)"

# --- a targets file that cannot be written: exit 6 before training, naming the key
echo "a file, not a directory" > "$w/not-a-dir"
expect_exit 6 "$TESSEL" run "$job" "${sets[@]}" --set metrics.port_base="$port" \
  --set metrics.targets_file="$w/not-a-dir/targets.json" --set job.output_dir="$w/targets"
expect_stderr "metrics.targets_file: cannot write targets file $w/not-a-dir/targets.json: .*Not a directory"
grep -q "epoch 1/" "$TESSEL_WORK/stderr" && fail "the unwritable targets file was found after training began"
[ ! -e "$w/targets" ] || fail "a job refused before training left $w/targets behind"
pass "an unwritable metrics.targets_file: exit 6 before training"

# --- an I/O error mid-training: after the first checkpoint, checkpoint.dir (a symbolic link) is switched,
# in one rename, to point at a regular file, so that the next checkpoint cannot be written
mkdir -p "$w/io/ckpt-real" && echo "not a directory" > "$w/io/file" && ln -s "$w/io/ckpt-real" "$w/io/ckpt"
"$TESSEL" run "$job" "${sets[@]}" --set train.epochs=100000 --set metrics.port_base=0 --set checkpoint.every_steps=3 \
  --set checkpoint.dir="$w/io/ckpt" --set job.output_dir="$w/io/run" >"$w/io.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do [ -e "$w/io/ckpt/latest" ] && break; sleep 0.1; done
ln -s "$w/io/file" "$w/io/ckpt.new" && mv -T "$w/io/ckpt.new" "$w/io/ckpt"
for _ in $(seq 1 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { kill -9 $pid; cat "$w/io.log"; fail "the job went on after its checkpoint directory broke"; }
set +e; wait $pid; rc=$?; set -e
[ "$rc" -eq 6 ] || { cat "$w/io.log"; fail "an I/O error mid-training: expected exit 6, got $rc"; }
python3 - "$w/io/run/summary.json" <<'PY' || fail "the failed run's summary.json does not say why"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["outcome"] == "failed" and s["exit_code"] == 6 and s["failed_rank"] == 0, s
assert "ckpt" in s["error"] and s["epochs_done"] >= 3 and len(s["epoch_loss"]) >= 3, s
print(f"summary.json: exit_code 6 after {s['epochs_done']} epochs: {s['error']}")
PY
[ "$(($(wc -l < "$w/io/run/metrics.csv") - 1))" -ge 3 ] || fail "metrics.csv lacks the epochs before the failure"
pass "an I/O error mid-training leaves a summary.json that says why, and metrics.csv"

# --- a bad loss: exit 8 naming the step, the rank and the value; the checkpoint before it is kept
gpt=(jobs/examples/gpt-demo.toml --set metrics.port_base=0 --set train.steps=20)
expect_exit 8 "$TESSEL" run "${gpt[@]}" --set train.lr=1e6 --set checkpoint.every_steps=1 --set job.output_dir="$w/bad"
expect_stderr "rank 0 \(embedded\): the loss exploded to [0-9.e+]+ at step 2, .* the last checkpoint, .*/checkpoints/step-1, is kept"
[ -d "$w/bad/checkpoints/step-1" ] || fail "the checkpoint before the bad loss is gone"
[ ! -d "$w/bad/checkpoints/step-2" ] || fail "the bad step was checkpointed"
python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))
assert s["exit_code"] == 8 and s["exit_reason"] == "bad loss" and s["step_loss"] and "exploded" in s["error"], s' \
  "$w/bad/summary.json" || fail "the bad-loss summary.json"
expect_exit 0 "$TESSEL" run "${gpt[@]}" --set train.steps=4 --set train.warmup_steps=0 --set train.lr=1e6 --set train.on_bad_loss=warn \
  --set job.output_dir="$w/warn"
expect_stderr "the loss exploded to .* at step 2, .*train.on_bad_loss = \"warn\": training on"
rows=$(($(wc -l < "$w/warn/metrics.csv") - 1))
[ "$rows" -eq 4 ] || fail "metrics.csv of a 4-step run has $rows rows"
pass "a bad loss: exit 8 naming step, rank and value, checkpoint step-1 kept; \"warn\" trains on; metrics.csv has every step"

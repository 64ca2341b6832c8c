#!/usr/bin/env bash
# During a 3-rank run, every rank serves /metrics on port_base + rank with tessel_step_duration_seconds,
# tessel_loss and tessel_build_info, labelled by its rank; the coordinator's targets file lists all three.
source "$(dirname "$0")/../lib.sh"
port_base=$(free_port_base 3) || fail "no free ports"  # tests/lib.sh: below the ephemeral range
job=jobs/examples/rgcn-synthetic.toml
log=$TESSEL_WORK/log
mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np 3 "$TESSEL" run "$job" --set data.graph="$TESSEL_WORK/graph.h5" \
  --set train.epochs=100000 --set metrics.port_base="$port_base" --set job.output_dir="$TESSEL_WORK/run" >"$log" 2>&1 &
mpirun_pid=$!
at_exit 'kill $mpirun_pid 2>/dev/null || true; wait $mpirun_pid 2>/dev/null || true'
python3 - "$port_base" "$TESSEL_WORK/run/targets.json" <<'PY' || { tail -20 "$log"; exit 1; }
import http.client, json, re, sys, time, urllib.request
base, targets_path = int(sys.argv[1]), sys.argv[2]
want = ["tessel_step_duration_seconds", "tessel_loss", "tessel_build_info"]
deadline = time.time() + 120
found = {}
while time.time() < deadline and len(found) < 3:
    for rank in range(3):
        if rank in found:
            continue
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{base + rank}/metrics", timeout=2).read().decode()
        except (OSError, http.client.HTTPException):
            continue
        ok = all(re.search(rf'^{m}[_a-z]*\{{[^}}]*rank="{rank}"', text, re.M) for m in want)
        # count only a rank that has finished an epoch: its step histogram has observations
        steps = re.search(rf'^tessel_step_duration_seconds_count\{{[^}}]*rank="{rank}"[^}}]*\}} (\S+)$', text, re.M)
        if ok and steps and float(steps.group(1)) >= 1:
            found[rank] = text
    time.sleep(0.5)
assert len(found) == 3, f"ranks with all three metrics: {sorted(found)}"
for rank, text in found.items():
    loss = re.search(rf'^tessel_loss\{{[^}}]*\}} (\S+)$', text, re.M).group(1)
    print(f"rank {rank}: {', '.join(want)} present; tessel_loss {loss}")
t = json.load(open(targets_path))
ranks = sorted(int(e["labels"]["rank"]) for e in t)
assert ranks == [0, 1, 2], ranks
print("PASS: three ranks scraped; targets file lists ranks", ranks)
PY

#!/usr/bin/env bash
# A live Prometheus (Debian's `prometheus`) on loopback, with monitoring/prometheus/prometheus.yml and
# alerts.yml as shipped (only the scrape and evaluation intervals shortened from 10 s to 1 s, so that the
# test takes minutes, not tens of minutes), pointed at the targets files of real 3-rank jobs.
#
# Part 1, while a full-graph RGCN, a sampled RGCN and a 2-stage GPT with offload run side by side:
#   - every query of every panel of monitoring/grafana/tessel.json returns data;
#   - the exporters serve exactly the metrics of monitoring/METRICS.md, with their documented labels;
#   - every alert rule is healthy; promtool checks the config as the test runs it;
#   - every scrape of each rank's step and loss is a step the job ran, with its loss in summary.json;
#   - stopped with SIGTERM (exit 7), each job removes its targets file.
# Part 2, four drills side by side, each a job of its own:
#   - a worker SIGKILLed mid-run: TesselRankDown fires (exit 5; a failed job keeps its targets);
#   - a worker SIGSTOPped: TesselJobStuck fires while the job still runs (heartbeat timeout 150 s);
#   - a GPT job with lr = 1e6: exit 8 with one message naming the step, the rank and the value, a
#     summary.json that says why, and TesselLossBad fires;
#   - worker 2 slowed on purpose (the test plugin libbroken_example_slow.so: its nn.relu.fwd takes 60 ms
#     longer in world rank 2): the coordinator's log and
#     tessel_straggler_score name it, and TesselStraggler fires.
source "$(dirname "$0")/../lib.sh"
command -v prometheus >/dev/null && command -v promtool >/dev/null \
  || skip "prometheus and promtool are not installed (scripts/setup-deps.sh installs Debian's prometheus)"

W=$TESSEL_WORK
check="python3 tests/cluster/prometheus_live.py"
# 10 ports apart: 7 jobs of 3 ranks, then Prometheus (tests/lib.sh, free_port_base).
base=$(free_port_base 80) || fail "no free port range"
prom_port=$((base + 70))
prom=http://127.0.0.1:$prom_port

mkdir -p "$W/prom/targets" "$W/runs"
cp monitoring/prometheus/prometheus.yml monitoring/prometheus/alerts.yml "$W/prom/"
sed -i -e 's/^  scrape_interval: 10s/  scrape_interval: 1s/' -e 's/^  evaluation_interval: 10s/  evaluation_interval: 1s/' \
  -e 's/^  scrape_timeout: 5s/  scrape_timeout: 1s/' "$W/prom/prometheus.yml"
grep -q "scrape_interval: 1s" "$W/prom/prometheus.yml" || fail "could not shorten the scrape interval"
promtool check config "$W/prom/prometheus.yml" >/dev/null || fail "promtool check config $W/prom/prometheus.yml"

launchers=()
cleanup() {
  for l in "${launchers[@]}"; do kill -9 $(descendants "$l") "$l" 2>/dev/null || true; done
  kill "${prom_pid:-0}" 2>/dev/null || true
  wait 2>/dev/null || true
}
at_exit cleanup
prometheus --config.file="$W/prom/prometheus.yml" --web.listen-address="127.0.0.1:$prom_port" \
  --storage.tsdb.path="$W/prom/data" --log.level=warn >"$W/prom/log" 2>&1 &
prom_pid=$!
for _ in $(seq 1 100); do curl -sf "$prom/-/ready" >/dev/null 2>&1 && break; sleep 0.2; done
curl -sf "$prom/-/ready" >/dev/null || { cat "$W/prom/log"; fail "prometheus did not start"; }

# start NAME JOB_INDEX NP JOB SETS...: a job named live-NAME in the background under scripts/tessel-mpirun,
# its exporters at base + 10 x JOB_INDEX, its targets file in the directory Prometheus watches.
start() {
  local name=$1 index=$2 np=$3 job=$4; shift 4
  env TESSEL="$TESSEL" scripts/tessel-mpirun -np "$np" "$job" --set job.name="live-$name" \
    --set metrics.port_base=$((base + 10 * index)) --set metrics.targets_file="$W/prom/targets/$name.json" \
    --set job.output_dir="$W/runs/$name" --set train.log_every=1 "$@" >"$W/$name.log" 2>&1 </dev/null &
  launchers+=($!)
  eval "launcher_$name=$!"
}
# wait_line NAME PATTERN SECONDS
wait_line() {
  for _ in $(seq 1 $(( $3 * 10 ))); do grep -q "$2" "$W/$1.log" && return 0; sleep 0.1; done
  cat "$W/$1.log"; fail "live-$1 never logged '$2'"
}
# finish NAME CODE SECONDS: the job's launcher exits with CODE within SECONDS.
finish() {
  local pid_var=launcher_$1 rc
  for _ in $(seq 1 $(( $3 * 10 ))); do kill -0 "${!pid_var}" 2>/dev/null || break; sleep 0.1; done
  set +e; wait "${!pid_var}"; rc=$?; set -e
  [ "$rc" -eq "$2" ] || { tail -20 "$W/$1.log"; fail "live-$1 exited $rc, expected $2"; }
}

# ---- Part 1: three real jobs, every panel, the catalog, the rules ----------------------------------------
t0=$(date +%s)
rgnn_sets=(--set train.epochs=100000 --set metrics.straggler_window=5)
start full 0 3 jobs/examples/rgcn-synthetic.toml "${rgnn_sets[@]}" --set data.graph="$W/full.h5"
start sampled 1 3 jobs/examples/rgcn-sampled-synthetic.toml "${rgnn_sets[@]}" --set data.graph="$W/sampled.h5" \
  --set data.synthetic.nodes=20000 --set train.batch_size=256
start gpt 2 3 jobs/examples/gpt-demo.toml --set resources.workers=2 --set pipeline.stages=2 \
  --set spill.policy=offload --set spill.dir="$W/spill" --set train.steps=100000 --set train.val_every=5 \
  --set train.val_batches=2 --set metrics.straggler_window=5
wait_line full "epoch 2/" 120
wait_line sampled "epoch 2/" 120
wait_line gpt "step 6/" 120
$check panels "$prom" monitoring/grafana/tessel.json 'live-(full|sampled|gpt)' "$t0" 150 || fail "a panel shows no data"
urls=()
for i in 0 1 2; do for r in 0 1 2; do urls+=("http://127.0.0.1:$((base + 10 * i + r))/metrics"); done; done
$check catalog monitoring/METRICS.md "${urls[@]}" || fail "the exporters and METRICS.md differ"
$check rules "$prom" || fail "an alert rule is unhealthy"
for name in full sampled gpt; do
  grep -q '"127.0.0.1:' "$W/prom/targets/$name.json" || fail "targets of live-$name do not list 127.0.0.1 (the bind address)"
  kill -TERM "$(eval echo \$launcher_$name)"
done
for name in full sampled gpt; do
  finish "$name" 7 60
  [ ! -e "$W/prom/targets/$name.json" ] || fail "live-$name ended but left its targets file"
  [ -s "$W/runs/$name/metrics.csv" ] || fail "live-$name wrote no metrics.csv"
  $check trained "$prom" "live-$name" "$t0" "$W/runs/$name/summary.json" || fail "live-$name: Prometheus and summary.json differ"
done
"$TESSEL" report "$W/runs/full" >/dev/null || fail "tessel report on the 3-rank run"
python3 - "$W/runs/full/report.html" <<'PY' || fail "the 3-rank run's report.html"
import re, sys
html = open(sys.argv[1]).read()
charts = set(re.findall(r'data-chart="([a-z-]+)"', html))
assert charts == {"loss", "step-time", "waits", "throughput", "bandwidth", "memory", "memory-kind"}, charts
# The full-graph 3-rank run waits on its peers in allreduce (gradient sums) and alltoall (halo rows).
waits = html[html.index('data-chart="waits"'):]
waits = waits[:waits.index("</svg>")]
# (a rank that was a straggler in some window is labelled "rank 1 (straggler) ...")
assert re.search(r"rank 1( \(straggler\))? allreduce<", waits) and re.search(r"rank 1( \(straggler\))? alltoall<", waits), \
    "the waits chart lacks a kind"
assert "http://" not in html and "https://" not in html and "<script" not in html, "not self-contained"
assert "rank 2" in html and "rank 1" in html, "a worker is missing"
print(f"report.html of live-full: {len(html)} bytes, charts {sorted(charts)}, no URL, no script")
PY
pass "every panel returned data, the exporters serve exactly the catalog, every rule is healthy, targets removed at the end"

# ---- Part 2: the alerts fire for real -----------------------------------------------------------------
t1=$(date +%s)
start kill 3 3 jobs/examples/rgcn-synthetic.toml "${rgnn_sets[@]}" --set data.graph="$W/full.h5"
start stop 4 3 jobs/examples/rgcn-synthetic.toml "${rgnn_sets[@]}" --set data.graph="$W/full.h5" \
  --set timeouts.heartbeat_timeout_seconds=150 --set timeouts.step_seconds=150
plugins=${TESSEL_TEST_PLUGINS:?set by CTest: the folder of the test plugins}
builtin=$(cd "$(dirname "$TESSEL")/../plugins" && pwd)
slow_paths="[\"$builtin/libtessel_nn.so\", \"$builtin/libtessel_rgnn.so\", \"$builtin/libtessel_gather.so\", \"$plugins/libbroken_example_slow.so\"]"
start slow 5 3 jobs/examples/rgcn-synthetic.toml "${rgnn_sets[@]}" --set data.graph="$W/full.h5" \
  --set "plugins.paths=$slow_paths" --set 'plugins.prefer=["broken_example"]'
wait_line kill "epoch 3/" 120
wait_line stop "epoch 3/" 120
sleep 3  # a few scrapes of the running jobs
kill -KILL "$(rank_pid "$launcher_kill" 2)"
kill -STOP "$(rank_pid "$launcher_stop" 2)"
start diverge 6 3 jobs/examples/gpt-demo.toml --set resources.workers=2 --set pipeline.stages=2 --set train.lr=1e6 \
  --set train.steps=50
finish diverge 8 90
msg=$(grep "tessel: error:" "$W/diverge.log" | head -1)
echo "$msg" | grep -Eq "rank [12] \(worker on [^)]*\): the loss (became NaN|became [+-]Inf|exploded to [0-9.e+]+) at step [0-9]+" \
  || fail "the bad loss message does not name the rank, the step and the value: $msg"
[ "$(echo "$msg" | grep -o "step [0-9]*" | sort -u | wc -l)" -eq 1 ] || fail "the message names two steps: $msg"
python3 - "$W/runs/diverge" <<'PY' || fail "the diverged run's summary.json does not say why"
import glob, json, sys
s = json.load(open(glob.glob(sys.argv[1] + "/summary.json")[0]))
assert s["outcome"] == "failed" and s["exit_code"] == 8 and s["failed_rank"] in (1, 2), s
assert "loss" in s["error"] and len(s["step_loss"]) >= 1, s
print(f"summary.json: outcome {s['outcome']}, exit_code {s['exit_code']}, failed_rank {s['failed_rank']}, "
      f"{len(s['step_loss'])} losses, error: {s['error'][:80]}...")
PY
$check alert "$prom" TesselLossBad live-diverge "$t1" 30 || fail "TesselLossBad did not fire"
pass "a diverging job: exit 8, $msg"

finish kill 5 60
[ -e "$W/prom/targets/kill.json" ] || fail "the killed job removed its targets file (TesselRankDown would not fire)"
python3 - "$W/runs/kill/summary.json" <<'PY' || fail "the killed job's summary.json does not say why"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["outcome"] == "failed" and s["exit_code"] == 5 and s["failed_rank"] == 2 and "rank 2" in s["error"], s
epochs, error = len(s["epoch_loss"]), s["error"][:70]
assert epochs >= 3, s
print(f"summary.json of the killed job: exit_code 5, failed_rank 2, {epochs} epochs: {error}...")
PY
$check alert "$prom" TesselRankDown live-kill "$t1" 150 rank=2 || fail "TesselRankDown did not fire for the killed rank"
$check alert "$prom" TesselJobStuck live-stop "$t1" 150 || fail "TesselJobStuck did not fire"
kill -0 "$launcher_stop" 2>/dev/null || fail "the stopped job ended before TesselJobStuck fired"
pass "TesselRankDown for the SIGKILLed worker, TesselJobStuck for the SIGSTOPped one while its job still ran"

wait_line slow "straggler: rank 2 (worker on" 150
grep "straggler: rank 2" "$W/slow.log" | head -1
$check value "$prom" 'tessel_straggler_score{job="live-slow", worker_rank="2", kind="vs_fastest"}' 60 1.5 \
  || fail "tessel_straggler_score does not name worker 2"
$check alert "$prom" TesselStraggler live-slow "$t1" 150 worker_rank=2 || fail "TesselStraggler did not fire"
pass "the slowed worker is named a straggler in the log, the metric and the alert"

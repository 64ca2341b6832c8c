"""The cost of monitoring (bench/run.sh metrics): step time with the exporters on against off.

For each job, runs `tessel run` (the embedded one-process run, where an exporter shares the cores with the
training) alternately with `metrics.port_base = 0` (off: no exporter, no HTTP server threads) and with an
exporter (on) that this script scrapes every second, 10 times as often as monitoring/prometheus/prometheus.yml
does. The two settings are interleaved (off, on, off, on, ...) so that drifts in the machine's speed hit
both alike. A run's figure is the median of its step times (summary.json `epoch_seconds` or
`step_seconds`) after the first step; a setting's figure is the median over its runs. overhead = on / off - 1.
The metrics the runtime keeps in memory (the counters behind metrics.csv) are kept in both settings: they
are what `port_base = 0` leaves on.

Jobs: rgcn-aifb (jobs/examples/rgcn-aifb.toml, AIFB from ../shared/data), sampled (rgcn-sampled-synthetic.toml
at 1/8 of its nodes unless --full, so that a run takes seconds), gpt (gpt-demo.toml). Target: at most 1%.

  python metrics_bench.py [--quick] [--reps N] [--jobs LIST] [--full] [--json FILE]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")
TESSEL = os.path.join(BUILD, "bin", "tessel")
DATA = os.environ.get("TESSEL_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))


def jobs(full):
    aifb = os.path.join(DATA, "aifb")
    return {
        "rgcn-aifb": (["jobs/examples/rgcn-aifb.toml", "--set", "train.epochs=40"], aifb),
        "sampled": (["jobs/examples/rgcn-sampled-synthetic.toml", "--set", "train.epochs=6"]
                    + ([] if full else ["--set", "data.synthetic.nodes=300000"]), None),
        "gpt": (["jobs/examples/gpt-demo.toml", "--set", "train.steps=40"], None),
    }


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(name, args, work, metrics_on):
    out = tempfile.mkdtemp(dir=work)
    port = free_port() if metrics_on else 0
    cmd = [TESSEL, "run", *args, "--set", f"metrics.port_base={port}", "--set", f"job.output_dir={out}"]
    if name == "sampled":  # generate the synthetic graph once, in the warm-up run
        cmd += ["--set", f"data.graph={os.path.join(work, 'sampled.h5')}"]
    stop = threading.Event()
    scrapes = [0]

    def scrape():
        while not stop.wait(1.0):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
                scrapes[0] += 1
            except OSError:
                pass

    scraper = threading.Thread(target=scrape) if metrics_on else None
    if scraper:
        scraper.start()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    stop.set()
    if scraper:
        scraper.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    summary = json.load(open(os.path.join(out, "summary.json")))
    seconds = summary.get("epoch_seconds") or summary.get("step_seconds")
    return statistics.median(seconds[1:]), scrapes[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--jobs", default="rgcn-aifb,sampled,gpt")
    ap.add_argument("--full", action="store_true", help="the sampled job at its full size (2.4M nodes)")
    ap.add_argument("--json", default=os.path.join(BUILD, "bench", "results", "metrics.json"))
    a = ap.parse_args()
    reps = a.reps or (3 if a.quick else 7)
    table = jobs(a.full)
    rows = []
    work = tempfile.mkdtemp(prefix="tessel-metrics-bench-")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    for name in a.jobs.split(","):
        args, needs = table[name]
        if needs and not os.path.isdir(needs):
            print(f"{name}: skipped, {needs} is missing", file=sys.stderr)
            continue
        run(name, args, work, False)  # warm-up: the page cache, a generated graph file
        off, on, scrapes = [], [], 0
        for _ in range(reps):
            off.append(run(name, args, work, False)[0])
            t, n = run(name, args, work, True)
            on.append(t)
            scrapes += n
        m_off, m_on = statistics.median(off), statistics.median(on)
        row = {"family": "metrics", "job": name, "reps": reps, "off_step_ms": m_off * 1e3, "on_step_ms": m_on * 1e3,
               "overhead_percent": (m_on / m_off - 1) * 100, "scrapes": scrapes,
               "off_runs_ms": [x * 1e3 for x in off], "on_runs_ms": [x * 1e3 for x in on],
               "target_percent": 1.0, "commit": commit}
        rows.append(row)
        os.makedirs(os.path.dirname(a.json), exist_ok=True)
        json.dump(rows, open(a.json, "w"), indent=2)
    print(f"{'job':<10} {'reps':>4} {'off ms/step':>12} {'on ms/step':>11} {'overhead':>9} {'scrapes':>8}  target <= 1%")
    for r in rows:
        print(f"{r['job']:<10} {r['reps']:>4} {r['off_step_ms']:>12.2f} {r['on_step_ms']:>11.2f} "
              f"{r['overhead_percent']:>8.2f}% {r['scrapes']:>8}")
    print(f"json: {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The cost of monitoring (bench/run.sh metrics): step time with the exporters on against off.

For each job, runs `tessel run` (the embedded one-process run, where an exporter shares the cores with the
training) alternately with `metrics.port_base = 0` (off: no exporter, no HTTP server threads) and with an
exporter (on) that this script scrapes every second, 10 times as often as monitoring/prometheus/prometheus.yml
does. The two settings are interleaved (off, on, off, on, ...) so that drifts in the machine's speed hit
both alike. A run's figure is the median of its step times (summary.json `epoch_seconds` or
`step_seconds`) after the first step; a setting's figure is the median over its runs. measured = on / off - 1.
On a shared 2-core VM runs of the same setting differ by +-10%, so `measured` cannot resolve 1%; the
table also gives its noise (the spread of the off runs, as a standard error of their median).

The bound is exact where the measurement is not: tessel-bench-metrics-cost times, in process, what
monitoring adds per step (every Metrics update the runtime makes after a step, and one metrics.csv row)
and per scrape (collecting and serialising a worker's registry). bound = (update + csv row) / step time +
scrape / scrape interval (10 s, prometheus.yml's; and 1 s) + the kernel timer's share (a sampled step's kernel
calls, read from the last scrape, x timer_us_per_call / metrics.kernel_sample_every, plus every call's
timer_off_us_per_call): the share of the step time monitoring can take.
The updates and the csv rows happen with the exporter off too (they feed metrics.csv): `port_base = 0`
removes the HTTP server and the scrapes.

Jobs: rgcn-aifb (jobs/examples/rgcn-aifb.toml, AIFB from ../shared/data), sampled (rgcn-sampled-synthetic.toml
at 1/8 of its nodes unless --full, so that a run takes seconds), gpt (gpt-demo.toml). Target: at most 1%.

  python metrics_bench.py [--quick] [--reps N] [--jobs LIST] [--full] [--json FILE]
"""
import argparse
import json
import os
import re
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
COST = os.path.join(BUILD, "bin", "tessel-bench-metrics-cost")
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
    last = [""]

    def scrape():
        while not stop.wait(1.0):
            try:
                last[0] = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
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
    return statistics.median(seconds[1:]), scrapes[0], kernel_calls_per_step(last[0])


def kernel_calls_per_step(text, every=10):
    """Kernel calls of one sampled step, from a scrape: tessel_kernel_calls_total over the steps sampled by then."""
    calls = sum(float(v) for v in re.findall(r"^tessel_kernel_calls_total\{[^}]*\} (\S+)$", text, re.M))
    epoch = re.findall(r"^tessel_epoch\{[^}]*\} (\S+)$", text, re.M)
    if not calls or not epoch:
        return 0.0
    sampled = (int(float(epoch[0])) - 1) // every + 1
    return calls / max(1, sampled)


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
    cost = json.loads(subprocess.run([COST], capture_output=True, text=True, check=True).stdout)
    per_step_us = cost["update_us_per_step"] + cost["csv_us_per_row"]
    print(f"in-process cost: {cost['update_us_per_step']:.2f} us of metric updates and {cost['csv_us_per_row']:.2f} us "
          f"of metrics.csv per step; {cost['scrape_us']:.0f} us per scrape ({cost['scrape_bytes']} bytes); the kernel "
          f"timer {cost['timer_us_per_call']:.3f} us per call on a sampled step, {cost['timer_off_us_per_call']:.4f} us on others")
    for name in a.jobs.split(","):
        args, needs = table[name]
        if needs and not os.path.isdir(needs):
            print(f"{name}: skipped, {needs} is missing", file=sys.stderr)
            continue
        run(name, args, work, False)  # warm-up: the page cache, a generated graph file
        off, on, scrapes, calls = [], [], 0, 0.0
        for _ in range(reps):
            off.append(run(name, args, work, False)[0])
            t, n, c = run(name, args, work, True)
            on.append(t)
            scrapes += n
            calls = max(calls, c)
        m_off, m_on = statistics.median(off), statistics.median(on)
        # Standard error of a median: 1.2533 x sd / sqrt(n), relative to the median.
        noise = 1.2533 * statistics.stdev(off) / len(off) ** 0.5 / m_off * 100 if len(off) > 1 else float("nan")
        timer_us = calls * (cost["timer_us_per_call"] / 10 + cost["timer_off_us_per_call"])  # kernel_sample_every = 10
        bound10 = ((per_step_us + timer_us) / (m_off * 1e6) + cost["scrape_us"] / 10e6) * 100
        bound1 = ((per_step_us + timer_us) / (m_off * 1e6) + cost["scrape_us"] / 1e6) * 100
        row = {"family": "metrics", "job": name, "reps": reps, "off_step_ms": m_off * 1e3, "on_step_ms": m_on * 1e3,
               "overhead_percent": (m_on / m_off - 1) * 100, "noise_percent": noise,
               "bound_percent_scrape_10s": bound10, "bound_percent_scrape_1s": bound1, "cost": cost, "scrapes": scrapes,
               "kernel_calls_per_step": calls, "kernel_timer_us_per_step": timer_us,
               "off_runs_ms": [x * 1e3 for x in off], "on_runs_ms": [x * 1e3 for x in on],
               "target_percent": 1.0, "commit": commit}
        rows.append(row)
        os.makedirs(os.path.dirname(a.json), exist_ok=True)
        json.dump(rows, open(a.json, "w"), indent=2)
    print(f"{'job':<10} {'reps':>4} {'off ms/step':>12} {'on ms/step':>11} {'measured':>9} {'noise':>7} "
          f"{'bound 10s':>10} {'bound 1s':>9}  target <= 1%")
    for r in rows:
        print(f"{r['job']:<10} {r['reps']:>4} {r['off_step_ms']:>12.2f} {r['on_step_ms']:>11.2f} "
              f"{r['overhead_percent']:>8.2f}% {r['noise_percent']:>6.2f}% {r['bound_percent_scrape_10s']:>9.4f}% "
              f"{r['bound_percent_scrape_1s']:>8.4f}%")
    print(f"json: {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Sampled mini-batch training benchmarks (bench/run.sh sampled | peers-sampled).

sampled        Tessel's jobs/examples/rgcn-sampled-synthetic.toml (2.4M nodes, 26.4M edges, 128 float
               features mapped from the graph file, fanouts [10, 10], batches of 1024): seeds per second
               end to end, and the share of the epoch the training thread spent waiting on feature rows
               (local gather + remote exchange), for 1 and 2 workers, prefetch on and off.
peers-sampled  the same model, fanouts, batch size and threads (2) with DGL's NeighborSampler and
               RelGraphConv, and PyG's NeighborLoader with RGCNConv where it runs (bench/peers/
               sampled_peer.py), on the same graph file; Tessel with one worker of 2 threads.

Each configuration is one `tessel run` (under mpirun for 2 workers); its summary.json gives the figures
of the timed epoch (the last; with --epochs 2 the first one warms the page cache and the allocator).
Prints a table and writes JSON rows (--json, default build/bench/results/FAMILY.json).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")
JOB = os.path.join(ROOT, "jobs", "examples", "rgcn-sampled-synthetic.toml")
GRAPH = os.path.join(ROOT, "runs", "cache", "rgcn-sampled-synthetic.h5")
MPI = ["mpirun", "--oversubscribe", "--mca", "btl_vader_single_copy_mechanism", "none"]
if os.geteuid() == 0:
    MPI.append("--allow-run-as-root")


def tessel(workers, threads, prefetch, epochs, out, extra):
    shutil.rmtree(out, ignore_errors=True)  # scratch: a run into an earlier run's directory is refused
    sets = ["--set", f"resources.workers={workers}", "--set", f"resources.threads_per_worker={threads}",
            "--set", f"train.prefetch={'true' if prefetch else 'false'}", "--set", f"train.epochs={epochs}",
            "--set", f"job.output_dir={out}", "--set", "job.name=bench-sampled"] + extra
    cmd = [os.path.join(BUILD, "bin", "tessel"), "run", JOB] + sets
    if workers > 1:
        cmd = MPI + ["--enable-recovery", "-np", str(workers + 1)] + cmd
    start = time.time()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''}"}
    s = json.load(open(os.path.join(out, "summary.json")))
    e = -1  # the last (timed) epoch
    epoch = s["epoch_seconds"][e]
    wait = s["epoch_feature_wait_seconds"][e]
    return {"seeds_per_second": s["epoch_seeds_per_second"][e], "epoch_seconds": epoch,
            "feature_wait_seconds": wait, "feature_wait_share": wait / epoch,
            "sample_seconds": s["epoch_sample_seconds"][e], "feature_seconds": s["epoch_feature_seconds"][e],
            "batches": s["epoch_batches"][e], "test_accuracy": s["test_accuracy"],
            "feature_rows_local": s.get("feature_rows_local"), "feature_rows_remote": s.get("feature_rows_remote"),
            "peak_worker_rss_bytes": s.get("peak_worker_rss_bytes"), "wall_seconds": time.time() - start,
            "loss": s["epoch_loss"][e]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("family", choices=["sampled", "peers-sampled"])
    ap.add_argument("--quick", action="store_true", help="one epoch per run instead of two")
    ap.add_argument("--json")
    ap.add_argument("--peers", default="dgl,pyg")
    a = ap.parse_args(argv)
    epochs = 1 if a.quick else 2
    work = os.path.join(BUILD, "bench", "sampled")
    os.makedirs(work, exist_ok=True)
    rows = []
    if a.family == "sampled":
        print(f"{'workers':>7} {'prefetch':>8} {'seeds/s':>9} {'epoch s':>8} {'wait s':>7} {'wait %':>7} "
              f"{'local rows':>11} {'remote rows':>11} {'test acc':>8}")
        for workers, threads in ((1, 2), (2, 1)):
            for prefetch in (True, False):
                r = tessel(workers, threads, prefetch, epochs, os.path.join(work, f"w{workers}-p{int(prefetch)}"), [])
                r.update({"family": "sampled", "workers": workers, "threads_per_worker": threads, "prefetch": prefetch})
                rows.append(r)
                if "error" in r:
                    print(f"{workers:>7} {str(prefetch):>8}  {r['error']}")
                    continue
                print(f"{workers:>7} {str(prefetch):>8} {r['seeds_per_second']:>9.0f} {r['epoch_seconds']:>8.2f} "
                      f"{r['feature_wait_seconds']:>7.2f} {100 * r['feature_wait_share']:>6.1f}% "
                      f"{r['feature_rows_local']:>11} {r['feature_rows_remote']:>11} {r['test_accuracy']:>8.4f}")
    else:
        t = tessel(1, 2, True, epochs, os.path.join(work, "peers-tessel"), [])
        t.update({"family": "peers-sampled", "system": "tessel", "threads": 2})
        rows.append(t)
        for peer in a.peers.split(","):
            py = os.path.join(BUILD, "bench-venv-dgl" if peer == "dgl" else "bench-venv", "bin", "python")
            out = os.path.join(work, f"peer-{peer}.json")
            p = subprocess.run([py, os.path.join(ROOT, "bench", "peers", "sampled_peer.py"), "--graph", GRAPH,
                                "--system", peer, "--threads", "2", "--fanouts", "10,10", "--batch-size", "1024",
                                "--hidden", "64", "--json", out], capture_output=True, text=True)
            r = json.load(open(out)) if p.returncode == 0 and os.path.exists(out) else {"error": p.stderr[-400:]}
            r.update({"family": "peers-sampled", "system": peer})
            rows.append(r)
        best = max((r.get("seeds_per_second", 0) for r in rows[1:]), default=0)
        print(f"{'system':>8} {'variant':>30} {'seeds/s':>9} {'ratio':>7}")
        for r in rows:
            sps = r.get("seeds_per_second")
            note = r.get("error") or r.get("unavailable") or ""
            ratio = f"{sps / best:.2f}x" if sps and best and r["system"] == "tessel" else ""
            print(f"{r['system']:>8} {r.get('variant', 'rgcn-sampled-synthetic'):>30} "
                  f"{(f'{sps:.0f}' if sps else '-'):>9} {ratio:>7} {note[:80]}")
    path = a.json or os.path.join(BUILD, "bench", "results", f"{a.family}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"rows: {path}")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Tessel against PyG on the GPU: RGCN, RGAT and HGT, 2 layers, hidden 64, 1 head, full graph, on
FB15k-237 (64 random features, 16 classes) and the >= 5M-edge synthetic graph, as bench/run.sh rgnn makes
them. Run by scripts/device-check.sh --bundle --bench on the GPU machine (PyTorch and PyG are there):

  python3 bench/gpu/compare.py [--out DIR] [--epochs 10] [--models rgcn,rgat,hgt] [--cases fb15k,synthetic]

Tessel: `tessel run bench/jobs/rgcn-bench.toml` with job.device = "cuda", one worker; its epoch times are
the executor's, each epoch ending when the loss is back on the host. PyG: bench/peers/rgnn_peer.py
--device cuda (RGCNConv and FastRGCNConv, RGATConv, HGTConv), each epoch bracketed by
torch.cuda.synchronize. One untimed warm-up epoch on both sides; medians of the timed epochs. Peak memory:
PyTorch's allocator peak for PyG, the worker's GPU peak (summary.json peak_gpu_bytes) where Tessel reports
it. Prints a table and writes DIR/gpu-compare.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import harness  # noqa: E402  (graph preparation and paths shared with bench/run.sh)

PYG = {"rgcn": ("RGCNConv", "FastRGCNConv"), "rgat": ("RGATConv",), "hgt": ("HGTConv",)}


def run(cmd, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired:
        return 124, "", f"killed after {timeout} s", time.monotonic() - t0


def tessel(graph, model, epochs, timeout):
    run_dir = os.path.join(harness.WORK, f"gpu-{model}-{os.path.basename(graph)[:-3]}")
    subprocess.run(["rm", "-rf", run_dir])
    cmd = [harness.TESSEL, "run", harness.JOB, "--set", f"data.graph={graph}", "--set", f"job.output_dir={run_dir}",
           "--set", "job.device=cuda", "--set", f"train.epochs={1 + epochs}", "--set", f"model.name={model}",
           "--set", "model.layers=2", "--set", "model.hidden=64", "--set", "resources.threads_per_worker=2"]
    if model != "rgcn":
        cmd += ["--set", "model.heads=1"]
    code, out, err, wall = run(cmd, timeout)
    path = os.path.join(run_dir, "summary.json")
    if code != 0 or not os.path.exists(path):
        return {"status": "error", "error": f"exit {code}: {(err or out).strip()[-300:]}"}
    s = json.load(open(path))
    t = s["epoch_seconds"][1:]
    res = {"status": "ok", "median_ms": 1e3 * statistics.median(t), "epochs_timed": len(t),
           "test_accuracy": s.get("test_accuracy"), "loss": s["epoch_loss"][-1], "wall_s": round(wall, 1),
           "peak_gpu_bytes": s.get("peak_gpu_bytes")}
    for k in ("epoch_forward_seconds", "epoch_backward_seconds"):
        if isinstance(s.get(k), list) and len(s[k]) > 1:
            res[k.split("_")[1] + "_ms"] = 1e3 * statistics.median(s[k][1:])
    return res


def pyg(graph, model, variant, epochs, timeout):
    out_json = os.path.join(harness.WORK, f"gpu-pyg-{model}-{variant}-{os.path.basename(graph)[:-3]}.json")
    cmd = [sys.executable, os.path.join(harness.PEERS, "rgnn_peer.py"), "--graph", graph, "--system", "pyg",
           "--model", model, "--variant", variant, "--device", "cuda", "--threads", "2", "--hidden", "64",
           "--layers", "2", "--heads", "1", "--epochs", str(epochs), "--warmup", "1", "--max-seconds", "60",
           "--deadline", str(timeout - 10), "--memory-fraction", "0", "--json", out_json]
    code, out, err, _ = run(cmd, timeout)
    try:
        r = json.load(open(out_json))
    except (OSError, ValueError):
        return {"status": "error", "error": f"exit {code}: {err.strip()[-300:]}"}
    if r.get("status") == "error" and "out of memory" in (r.get("error") or "").lower():
        r["status"] = "oom"
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(harness.WORK, "results"))
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--models", default="rgcn,rgat,hgt")
    ap.add_argument("--cases", default="fb15k,synthetic")
    ap.add_argument("--timeout", type=float, default=240)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    errors = []
    cases = a.cases.split(",")
    graphs = harness.prepare_graphs(cases, [64], True, errors)
    for e in errors:
        print("graph:", e, flush=True)
    files = {"fb15k": graphs.get(("fb15k", None)), "synthetic": graphs.get(("synthetic", 64))}
    import torch
    rows = []
    for case in cases:
        graph = files.get(case)
        if not graph:
            continue
        for model in a.models.split(","):
            t = tessel(graph, model, a.epochs, a.timeout)
            peers = {v: pyg(graph, model, v, a.epochs, a.timeout) for v in PYG[model]}
            ok = [p["median_ms"] for p in peers.values() if p.get("status") == "ok"]
            best = min(ok) if ok else None
            row = {"case": case, "model": model, "graph": graph, "gpu": torch.cuda.get_device_name(0),
                   "tessel": t, "pyg": peers, "best_pyg_ms": best,
                   "speedup": (best / t["median_ms"]) if best and t.get("status") == "ok" else None}
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("case", "model", "best_pyg_ms", "speedup")}), flush=True)
    json.dump(rows, open(os.path.join(a.out, "gpu-compare.json"), "w"), indent=1)
    fmt = lambda v, f=".2f": "n/a" if v is None else format(v, f)
    print(f"\n{'case':10} {'model':5} {'tessel ms':>10} {'fwd':>7} {'bwd':>7} {'MiB':>6} {'acc':>6} | "
          f"{'pyg variant':14} {'status':7} {'pyg ms':>9} {'pyg MiB':>8} | {'speedup':>7}")
    for r in rows:
        t = r["tessel"]
        for i, (v, p) in enumerate(r["pyg"].items()):
            left = (f"{r['case']:10} {r['model']:5} {fmt(t.get('median_ms')):>10} {fmt(t.get('forward_ms')):>7} "
                    f"{fmt(t.get('backward_ms')):>7} {fmt(t['peak_gpu_bytes'] / 2**20 if t.get('peak_gpu_bytes') else None, '.0f'):>6} "
                    f"{fmt(t.get('test_accuracy'), '.3f'):>6}") if i == 0 else " " * 52
            mib = p.get("peak_gpu_bytes")
            print(f"{left} | {v:14} {p.get('status', '?'):7} {fmt(p.get('median_ms')):>9} "
                  f"{fmt(mib / 2**20 if mib else None, '.0f'):>8} | {fmt(r['speedup']) if i == 0 else '':>7}")
        if t.get("status") != "ok":
            print(f"{'':10} tessel: {t.get('error')}")
        for v, p in r["pyg"].items():
            if p.get("status") != "ok":
                print(f"{'':10} pyg {v}: {p.get('status')}: {(p.get('error') or '')[:200]}")


if __name__ == "__main__":
    main()

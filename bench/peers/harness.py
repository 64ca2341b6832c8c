"""bench/run.sh's driver for the RGCN families (bench/README.md):

  rgnn        Tessel's full-graph RGCN epoch time on AIFB and FB15k-237, against the machine's limits;
  peers-rgnn  the same, plus PyG's RGCNConv and FastRGCNConv on the same graph files; the best peer is the
              baseline and ratio = Tessel / best peer (target, reported not asserted: <= 0.5). Also a
              hand-written compact PyTorch version of the model, as a reference (reference_ratio).

  python harness.py FAMILY [--quick] [--json FILE] [--wait-idle S]
                                                (run from anywhere; paths are the repository's)

Prints a table and writes the JSON rows. Exit 0 when every measurement ran (a peer that runs out of
memory is a result, not a failure), 1 when one failed (its row says why), 2 on a usage error.
Runs everything one process at a time, so the measurements do not compete for the cores.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import graphfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build")
TESSEL = os.path.join(BUILD, "bin", "tessel")
LIMITS = os.path.join(BUILD, "bin", "tessel-bench-limits")
WORK = os.path.join(BUILD, "bench")          # graph files and run directories
PEERS = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(ROOT, "bench", "jobs", "rgcn-bench.toml")
DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))

THREADS = 2
HIDDEN = 64
LAYERS = 2
WARMUP = 1          # untimed epochs on both sides: Tessel's first epoch_seconds entry is dropped
WAIT_IDLE = 0.0     # --wait-idle: seconds to wait for idle cores before each measurement
COMMIT = "unknown"  # set in main: the checkout measured, recorded in every case row
TARGET_RATIO = 0.5  # the target: Tessel <= 0.5 x the best peer (reported, not asserted)
# (variant of rgcn_torch.py, system name, metric prefix, is a baseline candidate). The peers are PyG's two
# documented layers; "compact" is the same model hand-written in PyTorch the way Tessel computes it, a
# reference for eager PyTorch on the same MKL, reported beside the ratio but never the baseline.
PEER_VARIANTS = (("rgcn", "pyg-RGCNConv", "pyg_RGCNConv", True),
                 ("fast", "pyg-FastRGCNConv", "pyg_FastRGCNConv", True),
                 ("compact", "torch-compact", "torch_compact", False))


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def rel(path: str) -> str:
    return os.path.relpath(path, ROOT)


def loadavg() -> float:
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return -1.0


def cpu_busy(seconds: float = 1.0) -> float:
    """Fraction of all cores busy over the next `seconds` (from /proc/stat), while this process sleeps."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait
    try:
        t0, i0 = sample()
        time.sleep(seconds)
        t1, i1 = sample()
        return 1.0 - (i1 - i0) / max(1, t1 - t0)
    except (OSError, ValueError, IndexError):
        return 0.0


def wait_idle(limit_seconds: float) -> float:
    """With --wait-idle S: waits up to S seconds for the cores to be nearly idle (< 10% busy over 2 s), so
    that a measurement does not share them with other work. Returns the busy fraction it last saw."""
    busy = cpu_busy(0.5)
    deadline = time.monotonic() + limit_seconds
    while busy > 0.10 and time.monotonic() < deadline:
        busy = cpu_busy(2.0)
    if limit_seconds > 0 and busy > 0.10:
        log(f"warning: cores still {100 * busy:.0f}% busy after waiting {limit_seconds:.0f} s; measuring anyway")
    return busy


def run_measured(cmd: list, timeout: float, env=None) -> tuple:
    """Runs cmd from the repository root; returns (exit code, stdout, stderr, peak RSS in bytes).
    The peak RSS is the child's own, from wait4's rusage. A child still running after `timeout` seconds
    is killed and reported as exit code 124."""
    timed_out = threading.Event()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, text=True)

        def kill() -> None:
            timed_out.set()
            p.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
        out.seek(0)
        err.seek(0)
        out_text, err_text = out.read(), err.read()
    if timed_out.is_set():
        return 124, out_text, err_text + f"\n(killed after {timeout:.0f} s)", 0
    return p.returncode, out_text, err_text, usage.ru_maxrss * 1024


# ---- graph files ------------------------------------------------------------------------------------

def newer(path: str, *sources: str) -> bool:
    """True when path exists and is at least as new as every existing source."""
    if not os.path.exists(path):
        return False
    t = os.path.getmtime(path)
    return all(t >= os.path.getmtime(s) for s in sources if os.path.exists(s))


def tessel_import(kind: str, args: list, out: str, errors: list) -> bool:
    if newer(out, TESSEL):
        return True
    if not os.path.exists(TESSEL):
        if os.path.exists(out):
            log(f"warning: {TESSEL} is missing; using the existing {rel(out)} as it is")
            return True
        errors.append(f"{rel(out)}: cannot import, {rel(TESSEL)} is missing")
        return False
    log(f"importing {rel(out)} with tessel import {kind}")
    code, out_text, err, _ = run_measured([TESSEL, "import", kind] + args + ["--out", out], 1800)
    if code != 0:
        errors.append(f"tessel import {kind} exited {code}: {(err or out_text).strip()[-400:]}")
        return False
    return True


def prepare_graphs(errors: list) -> dict:
    """Makes (or reuses) the graph files: AIFB as imported, FB15k-237 imported then given features.
    Re-imports when the tessel binary is newer than the file. Returns {case: path} for those that exist."""
    os.makedirs(WORK, exist_ok=True)
    graphs = {}
    aifb = os.path.join(WORK, "aifb.h5")
    if tessel_import("rdf", ["--triples", os.path.join(DATA, "aifb", "aifb_stripped.nt.gz"),
                             "--train-labels", os.path.join(DATA, "aifb", "trainingSet.tsv"),
                             "--test-labels", os.path.join(DATA, "aifb", "testSet.tsv")], aifb, errors):
        graphs["aifb"] = aifb
    fb = os.path.join(WORK, "fb15k.h5")
    fb_feat = os.path.join(WORK, "fb15k-feat.h5")
    if tessel_import("edges", ["--input", os.path.join(DATA, "fb15k-237", "FB15k-237.tar.gz"),
                               "--add-inverse", "--add-self-loop"], fb, errors):
        add = os.path.join(PEERS, "add_features.py")
        if not newer(fb_feat, fb, add):
            log(f"writing {rel(fb_feat)} (random features dim 64, 16 classes, 10% train)")
            code, out, err, _ = run_measured([sys.executable, add, fb, fb_feat, "--dim", "64", "--classes", "16",
                                              "--train", "0.1", "--test", "0.1", "--seed", "0"], 600)
            if code != 0:
                errors.append(f"add_features.py exited {code}: {err.strip()[-400:]}")
        if os.path.exists(fb_feat):
            graphs["fb15k"] = fb_feat
    return graphs


def fingerprint(path: str) -> str:
    import h5py
    with h5py.File(path, "r") as f:
        v = f["meta"].attrs.get("source_fingerprint", b"")
    v = v.decode() if isinstance(v, bytes) else str(v)
    # "tessel-import-rdf v1; triples=...; ...;add_features(...)" -> "tessel-import-rdf v1 + add_features(...)"
    parts = [p.strip() for p in v.split(";")]
    return " + ".join([parts[0]] + [p for p in parts[1:] if p.startswith("add_features")])


def git_commit() -> str:
    """The checkout's commit, with "+dirty" when the working tree has changes (read-only git calls)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return head + ("+dirty" if dirty else "") if head else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ---- limits and the cost model ----------------------------------------------------------------------

def cpu_has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def measure_limits(quick: bool, errors: list) -> dict:
    """Runs tessel-bench-limits at THREADS threads. On an AVX-512 machine whose OpenBLAS picks an AVX2
    kernel (0.3.21 does on this Zen 5), it runs once more with OPENBLAS_CORETYPE=SkylakeX: the GEMM limit is
    the better of the two, since it is what the machine can do."""
    if not os.path.exists(LIMITS):
        errors.append(f"{rel(LIMITS)} is missing: fraction_of_limit is not reported")
        return {}
    args = [LIMITS, "--threads", str(THREADS)] + (["--quick"] if quick else [])
    wait_idle(WAIT_IDLE)
    code, out, err, _ = run_measured(args, 600)
    if code != 0:
        errors.append(f"tessel-bench-limits exited {code}: {err.strip()[-300:]}")
        return {}
    lim = json.loads(out)
    lim["sgemm_default"] = lim["sgemm"]
    core = lim["sgemm"]["blas"]
    if cpu_has_avx512() and not any(k in core for k in ("SkylakeX", "Cooperlake", "SapphireRapids")):
        env = dict(os.environ, OPENBLAS_CORETYPE="SkylakeX")
        wait_idle(WAIT_IDLE)
        code, out2, err, _ = run_measured(args, 600, env=env)
        if code == 0:
            second = json.loads(out2)
            lim["sgemm_avx512"] = second["sgemm"]
            if lim["sgemm_avx512"]["gflops"] > lim["sgemm"]["gflops"]:
                lim["sgemm"] = lim["sgemm_avx512"]
            # The copy does not depend on the core type: a second sample of a limit that varies with the
            # host's load (40 to 70 GB/s seen on this VM); keep the better.
            if second["stream_copy"]["gbps"] > lim["stream_copy"]["gbps"]:
                lim["stream_copy"] = second["stream_copy"]
    return lim


def lower_bound(stats: dict, lim: dict) -> dict:
    """A floor on one epoch's time (bench/README.md "fraction_of_limit"):
    GEMM flops at the sgemm limit vs compulsory memory traffic at the stream-copy limit, whichever is
    larger. Flops: each layer applies W_r once per unique (relation, node) pair (Hector's compact
    materialization), 2*pairs*d_in*d_out forward, the same again for the weight gradient and, past
    layer 1, for the input gradient; a one-hot layer 1 is a row gather (no flops). Traffic: Adam reads and
    writes every parameter and both moments once (24 bytes a parameter; the gradient is assumed fused)."""
    onehot = stats["feature_dim"] == 0
    dims = [stats["nodes"] if onehot else stats["feature_dim"]] + [HIDDEN] * (LAYERS - 1) + [stats["classes"]]
    pairs = min(stats["unique_rel_src_pairs"], stats["unique_rel_dst_pairs"])
    flops = 0
    params = 0
    for layer in range(LAYERS):
        d_in, d_out = dims[layer], dims[layer + 1]
        params += stats["relations"] * d_in * d_out
        if layer == 0 and onehot:
            continue
        flops += 2 * pairs * d_in * d_out * (2 if layer == 0 else 3)
    traffic = 24 * params
    out = {"flops": flops, "bytes": traffic, "params": params}
    if lim:
        t_gemm = flops / (lim["sgemm"]["gflops"] * 1e9)
        t_mem = traffic / (lim["stream_copy"]["gbps"] * 1e9)
        out.update(seconds=max(t_gemm, t_mem), bound="gemm" if t_gemm >= t_mem else "memory")
    return out


# ---- the two sides ----------------------------------------------------------------------------------

def run_tessel(case: str, graph: str, epochs: int) -> dict:
    run_dir = os.path.join(WORK, f"run-{case}")
    shutil.rmtree(run_dir, ignore_errors=True)
    if not os.path.exists(TESSEL):
        return {"status": "error", "error": f"{rel(TESSEL)} is missing"}
    cmd = [TESSEL, "run", JOB, "--set", f"data.graph={rel(graph)}", "--set", f"job.output_dir={rel(run_dir)}",
           "--set", f"train.epochs={WARMUP + epochs}"]
    busy = wait_idle(WAIT_IDLE)
    load = loadavg()
    log(f"tessel: {case} ({' '.join(rel(c) if c.startswith(ROOT) else c for c in cmd)})")
    code, out, err, rss = run_measured(cmd, 3600)
    res = {"status": "ok", "load_avg": load, "busy_before": round(busy, 3), "command": " ".join(cmd)}
    summary_path = os.path.join(run_dir, "summary.json")
    if code != 0 or not os.path.exists(summary_path):
        return {**res, "status": "error", "error": f"tessel run exited {code}: {(err or out).strip()[-400:]}"}
    with open(summary_path) as f:
        summary = json.load(f)
    secs = summary.get("epoch_seconds") or []
    if len(secs) <= WARMUP:
        return {**res, "status": "error", "error": f"{rel(summary_path)}: epoch_seconds has {len(secs)} entries"}
    timed = secs[WARMUP:]
    res.update(epoch_seconds=timed, epochs_timed=len(timed), median_ms=1e3 * statistics.median(timed),
               min_ms=1e3 * min(timed),
               peak_rss_bytes=max(rss, int(summary.get("peak_worker_rss_bytes") or 0)),
               train_accuracy=summary.get("train_accuracy"), test_accuracy=summary.get("test_accuracy"),
               version=summary.get("version"))
    return res


def run_peer(case: str, graph: str, variant: str, epochs: int, quick: bool) -> dict:
    out_json = os.path.join(WORK, f"peer-{case}-{variant}.json")
    if os.path.exists(out_json):
        os.unlink(out_json)
    # RGCNConv with one-hot input takes tens of seconds an epoch: cap the timed part, keep >= 3 epochs.
    budget = 60 if quick else 300
    cmd = [sys.executable, os.path.join(PEERS, "rgcn_torch.py"), "--graph", graph, "--variant", variant,
           "--threads", str(THREADS), "--hidden", str(HIDDEN), "--layers", str(LAYERS), "--epochs", str(epochs),
           "--warmup", str(WARMUP), "--max-seconds", str(budget), "--json", out_json]
    busy = wait_idle(WAIT_IDLE)
    load = loadavg()
    log(f"peer: {case} {variant} ({' '.join(rel(c) if c.startswith(ROOT) else c for c in cmd)})")
    code, out, err, _ = run_measured(cmd, 3600)
    try:
        with open(out_json) as f:
            res = json.load(f)
    except (OSError, ValueError):
        return {"status": "error", "error": f"rgcn_torch.py exited {code}: {err.strip()[-400:]}", "load_avg": load}
    res.update(load_avg=load, busy_before=round(busy, 3), command=" ".join(cmd))
    return res


# ---- rows, table --------------------------------------------------------------------------------------

def limit_rows(bench: str, lim: dict) -> list:
    if not lim:
        return []
    rows = [{"bench": bench, "case": "machine", "metric": "sgemm_gflops", "value": lim["sgemm_default"]["gflops"],
             "unit": "GFLOP/s", "threads": THREADS, "n": lim["sgemm_default"]["n"],
             "blas": lim["sgemm_default"]["blas"], "note": "OpenBLAS as Tessel loads it"}]
    if "sgemm_avx512" in lim:
        rows.append({"bench": bench, "case": "machine", "metric": "sgemm_gflops_avx512",
                     "value": lim["sgemm_avx512"]["gflops"], "unit": "GFLOP/s", "threads": THREADS,
                     "n": lim["sgemm_avx512"]["n"], "blas": lim["sgemm_avx512"]["blas"],
                     "note": "OPENBLAS_CORETYPE=SkylakeX"})
    rows.append({"bench": bench, "case": "machine", "metric": "stream_copy_gbps",
                 "value": lim["stream_copy"]["gbps"], "unit": "GB/s", "threads": THREADS,
                 "median_gbps": lim["stream_copy"].get("median_gbps"), "note": "bytes read + bytes written"})
    return rows


def fraction(bound: dict, ms) -> float | None:
    if ms is None or "seconds" not in bound:
        return None
    return round(bound["seconds"] / (ms / 1e3), 4)


def r3(v):
    return None if v is None else round(v, 3)


def case_rows(bench: str, case: str, graph: str, stats: dict, bound: dict, tessel: dict, peers: dict) -> list:
    common = {"bench": bench, "case": case, "graph": rel(graph), "graph_source": fingerprint(graph),
              "threads": THREADS, "hidden": HIDDEN, "layers": LAYERS, "commit": COMMIT}
    rows = [{**common, "metric": "lower_bound_ms",
             "value": r3(1e3 * bound["seconds"]) if "seconds" in bound else None, "unit": "ms",
             "bound": bound.get("bound"), "flops": bound["flops"], "bytes": bound["bytes"],
             "params": bound["params"], "graph_stats": stats}]
    best = None
    reference = None
    for variant, system, prefix, candidate in PEER_VARIANTS:
        p = peers.get(variant)
        if p is None:
            continue
        ms = p.get("median_ms")
        rows.append({**common, "metric": f"{prefix}_epoch_ms", "system": system, "value": r3(ms),
                     "unit": "ms", "fraction_of_limit": fraction(bound, ms), "baseline_candidate": candidate,
                     "status": p.get("status"), "error": p.get("error"), "epochs_timed": p.get("epochs_timed"),
                     "epoch_ms": [r3(1e3 * t) for t in p.get("epoch_seconds", [])],
                     "min_ms": r3(1e3 * min(p["epoch_seconds"])) if p.get("epoch_seconds") else None,
                     "busy_before": p.get("busy_before"), "torch": p.get("torch"),
                     "torch_geometric": p.get("torch_geometric"), "blas": p.get("blas"),
                     "cpu_capability": p.get("cpu_capability"), "adam": p.get("adam"),
                     "pyg_extensions": p.get("pyg_extensions"), "test_accuracy": p.get("test_accuracy"),
                     "load_avg": p.get("load_avg")})
        rows.append({**common, "metric": f"{prefix}_peak_rss", "system": system,
                     "value": r3(p.get("peak_rss_bytes", 0) / 2**20) if p.get("peak_rss_bytes") else None,
                     "unit": "MiB", "note": "includes importing torch (its CUDA libraries are mapped too)"})
        if ms is None:
            continue
        if not candidate:
            reference = (system, ms)
        elif best is None or ms < best[1]:
            best = (system, ms)
    t_ms = tessel.get("median_ms")
    row = {**common, "metric": "tessel_epoch_ms", "system": "tessel", "value": r3(t_ms), "unit": "ms",
           "fraction_of_limit": fraction(bound, t_ms), "status": tessel.get("status"),
           "error": tessel.get("error"),
           "epochs_timed": tessel.get("epochs_timed"),
           "epoch_ms": [r3(1e3 * t) for t in tessel.get("epoch_seconds", [])],
           "min_ms": r3(tessel.get("min_ms")),
           "busy_before": tessel.get("busy_before"), "test_accuracy": tessel.get("test_accuracy"),
           "version": tessel.get("version"),
           "load_avg": tessel.get("load_avg")}
    if best is not None:
        row.update(baseline=r3(best[1]), baseline_system=best[0], target_ratio=TARGET_RATIO,
                   ratio=round(t_ms / best[1], 4) if t_ms is not None else None)
    if reference is not None:
        row.update(reference=r3(reference[1]), reference_system=reference[0],
                   reference_ratio=round(t_ms / reference[1], 4) if t_ms is not None else None)
    rows.append(row)
    rows.append({**common, "metric": "tessel_peak_rss", "system": "tessel",
                 "value": r3(tessel["peak_rss_bytes"] / 2**20) if tessel.get("peak_rss_bytes") else None,
                 "unit": "MiB"})
    return rows


def fmt(v, spec: str = ".1f", missing: str = "n/a") -> str:
    return missing if v is None else format(v, spec)


def print_table(header: list, rows: list) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: " | ".join(str(c).rjust(w) if i else str(c).ljust(w)
                                    for i, (c, w) in enumerate(zip(cells, widths)))
    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def report(family: str, rows: list, lim: dict) -> None:
    by = {(r["case"], r["metric"]): r for r in rows}
    cases = [c for c in ("aifb", "fb15k") if (c, "tessel_epoch_ms") in by]
    print()
    if family == "peers-rgnn":
        print(f"RGCN epoch (forward + backward + Adam), hidden {HIDDEN}, {LAYERS} layers, 1 worker, "
              f"{THREADS} threads; ratio = Tessel / best peer (target <= {TARGET_RATIO})")
        table = []
        for c in cases:
            t = by[(c, "tessel_epoch_ms")]
            table.append([c, fmt(t["value"]), t.get("baseline_system", "n/a"), fmt(t.get("baseline")),
                          fmt(t.get("ratio"), ".3f"), fmt(t.get("fraction_of_limit"), ".3f")])
        print_table(["case", "tessel ms/epoch", "best peer", "peer ms/epoch", "ratio", "fraction_of_limit"], table)
        print()
        detail = []
        for c in cases:
            t_ms = by[(c, "tessel_epoch_ms")]["value"]
            for _, system, metric, candidate in [("", "tessel", "tessel", False)] + list(PEER_VARIANTS):
                r = by.get((c, f"{metric}_epoch_ms"))
                if r is None:
                    continue
                rss = by.get((c, f"{metric}_peak_rss"), {}).get("value")
                status = r.get("status") or "error"
                if r.get("error"):
                    status += f": {r['error'][:60]}"
                if system != "tessel" and not candidate:
                    system += " (reference)"
                vs = t_ms / r["value"] if t_ms is not None and r["value"] else None
                detail.append([c, system, fmt(r["value"]), fmt(r.get("min_ms")), fmt(vs, ".3f"),
                               fmt(r.get("fraction_of_limit"), ".3f"), fmt(rss, ".0f"), r.get("epochs_timed") or 0,
                               fmt(r.get("test_accuracy"), ".3f"), status])
        print_table(["case", "system", "ms/epoch", "min ms", "tessel / this", "fraction_of_limit", "peak RSS MiB",
                     "epochs", "test acc", "status"], detail)
    else:
        print(f"Tessel RGCN epoch (forward + backward + Adam), hidden {HIDDEN}, {LAYERS} layers, 1 worker, "
              f"{THREADS} threads")
        table = []
        for c in cases:
            t = by[(c, "tessel_epoch_ms")]
            rss = by.get((c, "tessel_peak_rss"), {}).get("value")
            table.append([c, fmt(t["value"]), fmt(by[(c, "lower_bound_ms")]["value"]),
                          fmt(t.get("fraction_of_limit"), ".3f"), fmt(rss, ".0f"), t.get("epochs_timed") or 0,
                          fmt(t.get("test_accuracy"), ".3f"), t.get("status") or "error"])
        print_table(["case", "tessel ms/epoch", "lower bound ms", "fraction_of_limit", "peak RSS MiB", "epochs",
                     "test acc", "status"], table)
    if lim:
        extra = (f", {lim['sgemm_avx512']['gflops']:.1f} with OPENBLAS_CORETYPE=SkylakeX"
                 if "sgemm_avx512" in lim else "")
        print(f"\nlimits at {THREADS} threads: OpenBLAS sgemm {lim['sgemm_default']['gflops']:.1f} GFLOP/s "
              f"({lim['sgemm_default']['blas'].split()[-2]} kernels{extra}); "
              f"stream copy {lim['stream_copy']['gbps']:.1f} GB/s")


# ---- main -------------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("family", choices=["rgnn", "peers-rgnn"])
    ap.add_argument("--quick", action="store_true", help="5 timed epochs instead of 20, shorter limits")
    ap.add_argument("--json", help="where to write the rows (default build/bench/results/FAMILY.json)")
    ap.add_argument("--wait-idle", type=float, default=0, metavar="S",
                    help="before each measurement, wait up to S seconds for the cores to be idle")
    a = ap.parse_args()
    global WAIT_IDLE, COMMIT
    WAIT_IDLE = a.wait_idle
    COMMIT = git_commit()
    epochs = 5 if a.quick else 20
    json_path = os.path.abspath(a.json or os.path.join(WORK, "results", f"{a.family}.json"))
    errors = []

    busy = cpu_busy(1.0)
    if busy > 0.10:
        log(f"warning: the cores are {100 * busy:.0f}% busy before starting: other work shares them, so the "
            f"times below may be inflated (--wait-idle S waits for them before each measurement)")
    graphs = prepare_graphs(errors)
    lim = measure_limits(a.quick, errors)
    rows = limit_rows(a.family, lim)
    for case, graph in graphs.items():
        try:
            stats = graphfile.load(graph).stats()
        except ValueError as e:
            errors.append(str(e))
            continue
        bound = lower_bound(stats, lim)
        tessel = run_tessel(case, graph, epochs)
        if tessel["status"] != "ok":
            errors.append(f"tessel {case}: {tessel.get('error')}")
        peers = {}
        if a.family == "peers-rgnn":
            for variant, *_ in PEER_VARIANTS:
                peers[variant] = run_peer(case, graph, variant, epochs, a.quick)
                if peers[variant].get("status") not in ("ok", "oom"):
                    errors.append(f"peer {variant} {case}: {peers[variant].get('error')}")
        rows += case_rows(a.family, case, graph, stats, bound, tessel, peers)
    for c in ("aifb", "fb15k"):
        if c not in graphs:
            errors.append(f"case {c}: no graph file, skipped")

    os.makedirs(os.path.dirname(json_path), exist_ok=True)
    with open(json_path, "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    report(a.family, rows, lim)
    print(f"\nJSON: {json_path}")
    contended = sorted({f"{r['case']}/{r['system']}" for r in rows
                        if r.get("busy_before") is not None and r["busy_before"] > 0.10})
    if contended:
        print(f"warning: the cores were busy when these started, so their times may be inflated: "
              f"{', '.join(contended)} (rerun with --wait-idle S)")
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

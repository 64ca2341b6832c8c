"""The two sides of a point: Tessel (`tessel run` on bench/jobs/rgcn-bench.toml) and a peer variant
(rgnn_peer.py in its system's environment), each under the caps of a Budget, one process at a time."""
import json
import os
import shutil
import statistics

from harness_env import (HEADS, JOB, PEERS, TESSEL, THREADS, VENV_PY, WARMUP, WORK, loadavg, log, rel,
                         run_measured, show, wait_idle)

class Budget:
    """Per-run caps, so that the full family (about 200 processes) ends in well under 2 hours on 2 cores.
    A peer's timed epochs stop after `peer_epoch_s` seconds once 3 have run; the whole peer process (import,
    load, setup, warm-up, epochs) has `peer_deadline_s` (--peer-deadline), after which it stops (status
    "timeout" when it timed no epoch) and it is killed `grace_s` later if it does not stop by itself (a
    long library call can hold off the deadline's signal). The acceptance suite keeps its original budget.
    Tessel runs its epochs in full, within `tessel_s`. Past `family_s` (--budget-minutes) from the start, no
    further peer run starts: the matrix runs its most important points first (2 layers, size 64)."""
    def __init__(self, quick: bool, epochs: int | None, peer_deadline: float | None, minutes: float | None,
                 wait_idle_s: float = 0.0):
        self.epochs = epochs if epochs else (5 if quick else 20)
        # Once the family has run this long, the peer runs not yet started are not started (Tessel's are).
        self.family_s = 60 * (minutes if minutes else (30 if quick else 70))
        self.peer_epoch_s = 5 if quick else 10
        self.peer_deadline_s = peer_deadline if peer_deadline else (40 if quick else 60)
        self.acceptance_epoch_s = 60 if quick else 300
        self.acceptance_deadline_s = 180 if quick else 600
        self.tessel_s = 300 if quick else 900
        self.grace_s = 30
        self.wait_idle_s = wait_idle_s  # --wait-idle: before each run, wait this long for idle cores


def tessel_summary_times(summary: dict, key: str):
    v = summary.get(key)
    if not isinstance(v, list) or len(v) <= WARMUP:
        return None
    return v[WARMUP:]


def run_tessel(tag: str, graph: str, model: str, layers: int, hidden: int, budget: Budget,
               extra: list = (), epochs: int | None = None) -> dict:
    run_dir = os.path.join(WORK, f"run-{tag}")
    shutil.rmtree(run_dir, ignore_errors=True)
    if not os.path.exists(TESSEL):
        return {"status": "error", "error": f"{rel(TESSEL)} is missing"}
    cmd = [TESSEL, "run", JOB, "--set", f"data.graph={rel(graph)}", "--set", f"job.output_dir={rel(run_dir)}",
           "--set", f"train.epochs={WARMUP + (epochs or budget.epochs)}", "--set", f"model.name={model}",
           "--set", f"model.layers={layers}", "--set", f"model.hidden={hidden}"]
    if model != "rgcn":  # a key today's RGCN-only build does not know: only where it matters
        cmd += ["--set", f"model.heads={HEADS}"]
    for kv in extra:
        cmd += ["--set", kv]
    busy = wait_idle(budget.wait_idle_s)
    load = loadavg()
    log(f"tessel: {tag} ({show(cmd)})")
    code, out, err, rss = run_measured(cmd, budget.tessel_s)
    res = {"status": "ok", "load_avg": load, "busy_before": round(busy, 3), "command": show(cmd)}
    summary_path = os.path.join(run_dir, "summary.json")
    if code == 124:
        return {**res, "status": "timeout", "error": f"tessel run killed after {budget.tessel_s} s",
                "peak_rss_bytes": rss}
    if code != 0 or not os.path.exists(summary_path):
        return {**res, "status": "error", "error": f"tessel run exited {code}: {(err or out).strip()[-400:]}"}
    with open(summary_path) as f:
        summary = json.load(f)
    timed = tessel_summary_times(summary, "epoch_seconds")
    if timed is None:
        return {**res, "status": "error",
                "error": f"{rel(summary_path)}: epoch_seconds has {len(summary.get('epoch_seconds') or [])} entries"}
    fwd = tessel_summary_times(summary, "epoch_forward_seconds")
    bwd = tessel_summary_times(summary, "epoch_backward_seconds")
    res.update(epoch_seconds=timed, epochs_timed=len(timed), median_ms=1e3 * statistics.median(timed),
               min_ms=1e3 * min(timed),
               peak_rss_bytes=max(rss, int(summary.get("peak_worker_rss_bytes") or 0)),
               train_accuracy=summary.get("train_accuracy"), test_accuracy=summary.get("test_accuracy"),
               version=summary.get("version"))
    if fwd is not None and bwd is not None:
        res.update(forward_seconds=fwd, backward_seconds=bwd, forward_median_ms=1e3 * statistics.median(fwd),
                   backward_median_ms=1e3 * statistics.median(bwd))
    else:
        res["phase_error"] = "summary.json has no epoch_forward_seconds / epoch_backward_seconds"
    return res


def run_peer(tag: str, graph: str, system: str, model: str, variant: str, layers: int, hidden: int,
             epoch_s: float, deadline_s: float, budget: Budget) -> dict:
    out_json = os.path.join(WORK, f"peer-{tag}-{system}-{variant}.json")
    if os.path.exists(out_json):
        os.unlink(out_json)
    py = VENV_PY[system]
    if not os.path.exists(py):
        setup = "--dgl" if system == "dgl" else "--peers"
        return {"status": "error", "error": f"{rel(py)} is missing: run bench/peers/setup.sh {setup}"}
    cmd = [py, os.path.join(PEERS, "rgnn_peer.py"), "--graph", graph, "--system", system, "--model", model,
           "--variant", variant, "--threads", str(THREADS), "--hidden", str(hidden), "--layers", str(layers),
           "--heads", str(HEADS), "--epochs", str(budget.epochs), "--warmup", str(WARMUP),
           "--max-seconds", str(epoch_s), "--deadline", str(deadline_s), "--json", out_json]
    busy = wait_idle(budget.wait_idle_s)
    load = loadavg()
    log(f"peer: {tag} {system}-{variant} ({show(cmd)})")
    code, out, err, rss = run_measured(cmd, deadline_s + budget.grace_s)
    try:
        with open(out_json) as f:
            res = json.load(f)
    except (OSError, ValueError):
        if code == 124:
            res = {"status": "timeout", "error": f"killed after {deadline_s + budget.grace_s:.0f} s",
                   "peak_rss_bytes": rss}
        elif code < 0 or code == 137:
            res = {"status": "oom" if code in (-9, 137) else "error",
                   "error": f"rgnn_peer.py killed by signal {-code if code < 0 else 9} (the kernel's OOM killer?): "
                            f"{err.strip()[-300:]}", "peak_rss_bytes": rss}
        else:
            res = {"status": "error", "error": f"rgnn_peer.py exited {code}: {err.strip()[-400:]}"}
    res.update(load_avg=load, busy_before=round(busy, 3), command=show(cmd))
    return res

"""The JSON rows of a point (bench/README.md "JSON rows"): each system's forward, backward, epoch and peak
RSS against the floor, Tessel's ratios to the best peer and the reference, the ablations' and the scale
suite's rows. `run` is what every point row of the run carries: {"bench": the family, "commit": the
checkout measured}."""
from harness_env import ABLATIONS, HEADS, SCALE_BYTES_PER_EDGE, THREADS, rel
from harness_graphs import fingerprint

def r3(v):
    return None if v is None else round(v, 3)


def fraction(bound: dict, ms) -> float | None:
    if ms is None or "seconds" not in bound:
        return None
    return round(bound["seconds"] / (ms / 1e3), 4)


def bound_keys(bound: dict) -> dict:
    """The lower_bound_ms row's account of the floor."""
    keys = ("bound", "bound_level", "flops", "bytes", "adam_bytes", "edge_bytes", "params", "working_set_bytes",
            "level_bytes", "level_ms")
    return {k: bound.get(k) for k in keys}


def mib(b):
    return r3(b / 2**20) if b else None


def system_rows(common: dict, prefix: str, system: str, res: dict, bound: dict, extra: dict) -> list:
    """The forward, backward, epoch and peak-RSS rows of one system at one point."""
    status = res.get("status")
    epoch = {**common, "metric": f"{prefix}_epoch_ms", "phase": "epoch", "system": system,
             "value": r3(res.get("median_ms")), "unit": "ms", "fraction_of_limit": fraction(bound, res.get("median_ms")),
             "status": status, "error": res.get("error"), "epochs_timed": res.get("epochs_timed"),
             "epoch_ms": [r3(1e3 * t) for t in res.get("epoch_seconds", [])],
             "min_ms": r3(1e3 * min(res["epoch_seconds"])) if res.get("epoch_seconds") else None,
             "busy_before": res.get("busy_before"), "load_avg": res.get("load_avg"),
             "test_accuracy": res.get("test_accuracy"), **extra}
    if status == "ok" and res.get("cut_by"):
        epoch["cut_by"] = res["cut_by"]
    rows = []
    for phase, key in (("forward", "forward_median_ms"), ("backward", "backward_median_ms")):
        row = {**common, "metric": f"{prefix}_{phase}_ms", "phase": phase, "system": system,
               "value": r3(res.get(key)), "unit": "ms", "status": status, "error": res.get("error")}
        if status == "ok" and res.get(key) is None:
            row.update(status="missing", error=res.get("phase_error") or "no per-phase times")
        rows.append(row)
    rows.append(epoch)
    rows.append({**common, "metric": f"{prefix}_peak_rss", "phase": "epoch", "system": system,
                 "value": mib(res.get("peak_rss_bytes")), "unit": "MiB", "status": status})
    return rows


def peer_extra(p: dict) -> dict:
    keys = ("torch", "torch_geometric", "dgl", "dgl_threads", "blas", "cpu_capability", "adam", "pyg_extensions",
            "params", "setup_seconds", "memory_cap_bytes")
    return {k: p[k] for k in keys if k in p}


def compare(tessel_rows: list, peers: list, target: float | None) -> None:
    """Adds baseline / ratio to Tessel's epoch and peak-RSS rows. peers: (name, candidate, result)."""
    ok = [(name, cand, p) for name, cand, p in peers if p.get("status") == "ok" and p.get("median_ms")]
    best = min(((p["median_ms"], name, p) for name, cand, p in ok if cand), default=None, key=lambda t: t[0])
    ref = next(((p["median_ms"], name) for name, cand, p in ok if not cand), None)
    epoch = next(r for r in tessel_rows if r["metric"].endswith("_epoch_ms"))
    rss = next(r for r in tessel_rows if r["metric"].endswith("_peak_rss"))
    t_ms = epoch["value"]
    if best is not None:
        epoch.update(baseline=r3(best[0]), baseline_system=best[1],
                     ratio=round(t_ms / best[0], 4) if t_ms is not None else None)
        if target is not None:
            epoch.update(target_ratio=target, meets_target=(t_ms / best[0] <= target) if t_ms is not None else None)
        b_rss = mib(best[2].get("peak_rss_bytes"))
        rss.update(baseline=b_rss, baseline_system=best[1],
                   ratio=round(rss["value"] / b_rss, 4) if rss["value"] and b_rss else None,
                   lower_than_baseline=(rss["value"] < b_rss) if rss["value"] and b_rss else None)
    peer_rss = [mib(p.get("peak_rss_bytes")) for _, cand, p in ok if cand and p.get("peak_rss_bytes")]
    if peer_rss and rss["value"]:
        rss["lower_than_every_peer"] = all(rss["value"] < v for v in peer_rss)
    if ref is not None:
        epoch.update(reference=r3(ref[0]), reference_system=ref[1],
                     reference_ratio=round(t_ms / ref[0], 4) if t_ms is not None else None)


def point_rows(run: dict, suite: str, model: str, case: str, layers: int, size: int, graph: str, stats: dict,
               bound: dict, tessel: dict, peers: list, target: float | None) -> list:
    """peers: (variant tuple, result)."""
    common = {"bench": run["bench"], "suite": suite, "model": model, "case": case, "layers": layers, "size": size,
              "hidden": size, "heads": HEADS, "input": "onehot" if stats["feature_dim"] == 0 else "features",
              "graph": rel(graph), "graph_source": fingerprint(graph), "threads": THREADS, "commit": run["commit"]}
    rows = [{**common, "metric": "lower_bound_ms", "phase": "epoch",
             "value": r3(1e3 * bound["seconds"]) if "seconds" in bound else None, "unit": "ms",
             **bound_keys(bound), "graph_stats": stats}]
    for (system, _, variant, name, prefix, candidate), p in peers:
        rows += system_rows(common, prefix, name, p, bound, {"baseline_candidate": candidate, **peer_extra(p)})
    t_rows = system_rows(common, "tessel", "tessel", tessel, bound, {"version": tessel.get("version")})
    compare(t_rows, [(v[3], v[5], p) for v, p in peers], target)
    return rows + t_rows


def ablation_rows(run: dict, model: str, case: str, graph: str, stats: dict, bound: dict, default: dict,
                  variants: dict) -> list:
    common = {"bench": run["bench"], "suite": "ablation", "model": model, "case": case, "layers": 2, "size": 64,
              "hidden": 64, "heads": HEADS, "input": "features", "graph": rel(graph),
              "graph_source": fingerprint(graph), "threads": THREADS, "commit": run["commit"]}
    rows = []
    for (key, infix), res in ((a, variants[a[0]]) for a in ABLATIONS if a[0] in variants):
        r = system_rows({**common, "setting": f"model.{key}=false"}, f"tessel_{infix}", f"tessel-{infix}", res,
                        bound, {"version": res.get("version")})
        for row in r:
            base_key = {"forward": "forward_median_ms", "backward": "backward_median_ms", "epoch": "median_ms"}
            if row["metric"].endswith("_peak_rss"):
                b = mib(default.get("peak_rss_bytes"))
            else:
                b = r3(default.get(base_key[row["phase"]]))
            row.update(baseline=b, baseline_system="tessel (default: compact and reorder on)",
                       ratio=round(row["value"] / b, 4) if row["value"] and b else None)
            if row["metric"].endswith("_peak_rss"):
                row["default_lower"] = (b < row["value"]) if row["value"] and b else None
        rows += r
    return rows


def scale_rows(run: dict, model: str, graph: str, stats: dict, bound: dict, res: dict) -> list:
    """The scale suite's rows: Tessel's epoch (with fraction_of_limit) and its peak memory per edge."""
    common = {"bench": run["bench"], "suite": "scale", "model": model, "case": "scale", "layers": 2, "size": 64,
              "hidden": 64, "heads": HEADS, "input": "features", "graph": rel(graph),
              "graph_source": fingerprint(graph), "threads": THREADS, "commit": run["commit"], "edges": stats["edges"]}
    ok = res.get("status") == "ok"
    status = {"status": res.get("status"), **({"error": res["error"]} if res.get("error") else {})}
    rows = [{**common, "metric": "lower_bound_ms", "phase": "epoch",
             "value": r3(1e3 * bound["seconds"]) if "seconds" in bound else None, "unit": "ms",
             **bound_keys(bound), "graph_stats": stats}]
    rows.append({**common, "metric": "tessel_epoch_ms", "phase": "epoch", "unit": "ms", **status,
                 "value": r3(res.get("median_ms")) if ok else None, "min_ms": r3(res.get("min_ms")) if ok else None,
                 "epoch_ms": [r3(1e3 * t) for t in res.get("epoch_seconds") or []],
                 "epochs_timed": res.get("epochs_timed"),
                 "fraction_of_limit": fraction(bound, res.get("median_ms")) if ok else None,
                 "forward_ms": r3(res.get("forward_median_ms")), "backward_ms": r3(res.get("backward_median_ms")),
                 "test_accuracy": res.get("test_accuracy"), "load_avg": res.get("load_avg"),
                 "busy_before": res.get("busy_before")})
    peak = res.get("peak_rss_bytes")
    per_edge = peak / stats["edges"] if peak else None
    limit = SCALE_BYTES_PER_EDGE[model]
    rows.append({**common, "metric": "tessel_peak_bytes_per_edge", "phase": "epoch", "unit": "B/edge", **status,
                 "value": round(per_edge, 1) if per_edge else None, "peak_rss_bytes": peak,
                 "target_bytes_per_edge": limit,
                 "meets_target": per_edge <= limit if per_edge else None})
    return rows
